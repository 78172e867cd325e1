#!/usr/bin/env node
// wat2wasm.js OUTDIR FILE.wat... — assembles WebAssembly text files into OUTDIR/<name>.wasm with
// the wabt npm package (pinned by the repository's package.json: "wabt": "1.0.39"). Used by the
// host tests to build hostile and sample modules; exits 1 with one line per failing file.
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [outDir, ...files] = process.argv.slice(2);
  if (!outDir || files.length === 0) {
    console.error('usage: wat2wasm.js OUTDIR FILE.wat...');
    process.exit(2);
  }
  let wabt;
  try {
    wabt = await require('wabt')();
  } catch (e) {
    console.error('wat2wasm.js: the wabt npm package is missing (run npm ci): ' + e.message);
    process.exit(3);
  }
  fs.mkdirSync(outDir, { recursive: true });
  let failed = false;
  for (const file of files) {
    try {
      const mod = wabt.parseWat(file, fs.readFileSync(file, 'utf8'), { bulk_memory: true, sign_extension: true });
      mod.resolveNames();
      mod.validate();
      const { buffer } = mod.toBinary({ write_debug_names: true });
      mod.destroy();
      fs.writeFileSync(path.join(outDir, path.basename(file, '.wat') + '.wasm'), Buffer.from(buffer));
    } catch (e) {
      console.error(file + ': ' + String(e.message || e).replace(/\n/g, ' | '));
      failed = true;
    }
  }
  process.exit(failed ? 1 : 0);
}

main();
