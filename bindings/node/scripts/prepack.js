// `npm pack` / `npm publish`: copy the built libllm into prebuilds/<platform>-<arch>/ so the tarball
// runs with no variables on this platform. The library comes from LLM_LIBRARY, LLM_LIB_DIR, or the
// repository's build tree (../../build/lib); with none, the tarball is packed without it (it then
// uses an installed libllm) and this says so.
'use strict';
const fs = require('fs');
const path = require('path');

const here = path.join(__dirname, '..');
const dest = path.join(here, 'prebuilds', `${process.platform}-${process.arch}`);
const soname = { darwin: 'libllm.0.dylib', win32: 'llm.dll' }[process.platform] || 'libllm.so.0';
const candidates = [];
if (process.env.LLM_LIBRARY) candidates.push(path.resolve(process.env.LLM_LIBRARY));
for (const dir of [process.env.LLM_LIB_DIR, path.join(here, '..', '..', 'build', 'lib')]) {
    if (dir) candidates.push(path.join(dir, soname));
}
const found = candidates.find((c) => fs.existsSync(c));
if (!found) {
    console.warn(`prepack: no libllm in ${candidates.join(', ')}; packing without a prebuilt library`);
    process.exit(0);
}
fs.mkdirSync(dest, { recursive: true });
fs.copyFileSync(fs.realpathSync(found), path.join(dest, soname));
console.log(`prepack: ${found} -> ${path.relative(here, path.join(dest, soname))}`);
