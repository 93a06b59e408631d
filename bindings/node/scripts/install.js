// `npm install`: nothing to do when the package carries a prebuilt libllm for this platform (a packed
// tarball) or the system has one (the libllm0 package). Installed from a checkout without either, build
// the library with CMake (the repository two levels up) into prebuilds/<platform>-<arch>/.
// LLM_NODE_SKIP_BUILD=1 never builds.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');

const here = path.join(__dirname, '..');
const dest = path.join(here, 'prebuilds', `${process.platform}-${process.arch}`);
const soname = { darwin: 'libllm.0.dylib', win32: 'llm.dll' }[process.platform] || 'libllm.so.0';
const root = path.join(here, '..', '..');

function systemHasLibrary() {
    if (process.platform !== 'linux') return false;
    try {
        return execFileSync('/sbin/ldconfig', ['-p'], { encoding: 'utf8' }).includes(soname);
    } catch (e) {
        return false;
    }
}

if (process.env.LLM_NODE_SKIP_BUILD === '1' || process.env.LLM_LIBRARY || process.env.LLM_LIB_DIR ||
    fs.existsSync(path.join(dest, soname)) || systemHasLibrary()) {
    process.exit(0);
}
// A checkout (a symlinked path install, `npm link`): its own sources, not some other project's
// CMakeLists.txt two levels up.
if (!fs.existsSync(path.join(root, 'CMakeLists.txt')) || !fs.existsSync(path.join(root, 'include', 'llm.h'))) {
    console.warn(`libllm-runtime: no prebuilt libllm for ${process.platform}-${process.arch} and no ` +
                 'installed one; install the libllm0 package or set LLM_LIBRARY');
    process.exit(0);
}
const build = path.join(here, 'build', 'cmake');
const run = (args) => execFileSync('cmake', args, { stdio: 'inherit' });
run(['-S', root, '-B', build, '-DCMAKE_BUILD_TYPE=Release', '-DLLM_BUILD_TESTS=OFF', '-DLLM_BUILD_EXAMPLES=OFF',
     '-DLLM_INSTALL_STATIC=OFF']);
run(['--build', build, '--target', 'llm', '-j', process.env.CMAKE_BUILD_PARALLEL_LEVEL || '2']);
fs.mkdirSync(dest, { recursive: true });
fs.copyFileSync(fs.realpathSync(path.join(build, 'lib', soname)), path.join(dest, soname));
console.log(`libllm-runtime: built ${path.join(dest, soname)}`);
