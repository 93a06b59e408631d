// `npm pack` / `npm publish`: copy the built libllm into prebuilds/<platform>-<arch>/ so the tarball
// runs with no variables on this platform. The library comes from LLM_LIBRARY, LLM_LIB_DIR, or the
// repository's build tree (../../build/lib); with none, the tarball is packed without it (it then
// uses an installed libllm) and this says so. A cross-built library for another target joins it with
// LLM_PREBUILD_<PLATFORM>_<ARCH>=path, e.g. LLM_PREBUILD_LINUX_ARM64=build-arm64/lib/libllm.so.0.
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
// A stale copy from an earlier pack must not outlive the library it came from.
fs.rmSync(path.join(here, 'prebuilds'), { recursive: true, force: true });
const copy = (from, dir, name) => {
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(fs.realpathSync(from), path.join(dir, name));
    console.log(`prepack: ${from} -> ${path.relative(here, path.join(dir, name))}`);
};
copy(found, dest, soname);
for (const [key, value] of Object.entries(process.env)) {
    const m = /^LLM_PREBUILD_([A-Z0-9]+)_([A-Z0-9]+)$/.exec(key);
    if (!m || !value) continue;
    const target = `${m[1].toLowerCase()}-${m[2].toLowerCase()}`;
    copy(path.resolve(value), path.join(here, 'prebuilds', target), target.startsWith('linux') ? 'libllm.so.0' : path.basename(value));
}
