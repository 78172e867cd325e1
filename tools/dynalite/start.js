// usage: node start.js PORT [DIR]
// Starts dynalite 4.0.0 on 127.0.0.1:PORT (loopback only) with table create/delete/update
// delays of 0 ms. Data stays in memory unless DIR is given (LevelDB there; survives restarts).
const dynalite = require('dynalite')
const port = +(process.argv[2] || 4567)
const path = process.argv[3]
const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0, path })
server.listen(port, '127.0.0.1', () => {
  const a = server.address()
  console.log(`dynalite listening at http://${a.address}:${a.port} (path=${path || 'memory'})`)
})
server.on('error', (err) => { console.error(`dynalite: ${err.message}`); process.exit(1) })
for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)))

// dynalite rethrows a request stream's 'error' event (index.js: req.on('error', err => { throw err })),
// so a client that gives up mid-request (an HTTP timeout, a cancelled context, a reset connection)
// would crash the whole server for every other client. Such an error concerns one request only:
// log it and keep serving. Anything else still ends the process.
process.on('uncaughtException', (err) => {
  if (err && (err.code === 'ECONNRESET' || err.code === 'EPIPE' || err.message === 'aborted')) {
    console.error(`dynalite: a client aborted a request (${err.code || err.message}); still serving`)
    return
  }
  console.error(err)
  process.exit(1)
})
