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
