// node -r ./force-loopback.js ...  : forces every net.Server.listen onto 127.0.0.1 (copied from the
// shared emulator launchers: kinesis-local binds 0.0.0.0 and has no host option)
const net = require('net')
const orig = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (args[0] && typeof args[0] === 'object' && !Array.isArray(args[0])) {
    args[0] = { ...args[0], host: '127.0.0.1' }
  } else if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    if (typeof args[1] === 'string') args[1] = '127.0.0.1'
    else args.splice(1, 0, '127.0.0.1')
  }
  return orig.apply(this, args)
}
