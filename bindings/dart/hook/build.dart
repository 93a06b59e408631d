// Native-assets build hook: builds libllm with CMake from this checkout (two directories up) for the
// target the Dart/Flutter tool asks for, and bundles the shared library with the app, where
// LlmLib.open() finds it by name. Not compiled or run here (no Dart SDK on the project's machines):
// written against package:hooks / package:code_assets (Dart 3.10); expect API drift.
//
// Android cross-builds use the NDK's CMake toolchain file (ANDROID_NDK_HOME, or the NDK the
// Flutter tool reports); iOS/macOS use CMAKE_OSX_ARCHITECTURES; Linux/Windows build for the host.
// LLM_LIBRARY set at build time skips the build (the app then opens that file itself).
import 'dart:io';

import 'package:code_assets/code_assets.dart';
import 'package:hooks/hooks.dart';

void main(List<String> args) async {
  await build(args, (input, output) async {
    if (!input.config.buildCodeAssets) return;
    if ((Platform.environment['LLM_LIBRARY'] ?? '').isNotEmpty) return;
    final code = input.config.code;
    final root = input.packageRoot.resolve('../../');
    final buildDir = input.outputDirectory.resolve('cmake/');
    final os = code.targetOS;
    final arch = code.targetArchitecture;

    final configure = <String>[
      '-S', root.toFilePath(), '-B', buildDir.toFilePath(),
      '-DCMAKE_BUILD_TYPE=Release', '-DLLM_BUILD_TESTS=OFF', '-DLLM_BUILD_EXAMPLES=OFF',
      '-DLLM_INSTALL_STATIC=OFF',
    ];
    if (os == OS.android) {
      final ndk = Platform.environment['ANDROID_NDK_HOME'] ?? Platform.environment['ANDROID_NDK_ROOT'];
      if (ndk == null) throw StateError('libllm: set ANDROID_NDK_HOME to build for Android');
      const abis = {
        Architecture.arm64: 'arm64-v8a', Architecture.arm: 'armeabi-v7a',
        Architecture.x64: 'x86_64', Architecture.ia32: 'x86',
      };
      configure.addAll([
        '-DCMAKE_TOOLCHAIN_FILE=$ndk/build/cmake/android.toolchain.cmake',
        '-DANDROID_ABI=${abis[arch]}',
        '-DANDROID_PLATFORM=android-${code.android.targetNdkApi}',
      ]);
    } else if (os == OS.iOS || os == OS.macOS) {
      configure.add('-DCMAKE_OSX_ARCHITECTURES=${arch == Architecture.arm64 ? 'arm64' : 'x86_64'}');
      if (os == OS.iOS) configure.add('-DCMAKE_SYSTEM_NAME=iOS');
    }
    await _run('cmake', configure);
    await _run('cmake', ['--build', buildDir.toFilePath(), '--target', 'llm', '--config', 'Release']);

    final file = switch (os) {
      OS.android || OS.linux => 'lib/libllm.so',
      OS.macOS || OS.iOS => 'lib/libllm.dylib',
      OS.windows => 'lib/Release/llm.dll',
      _ => throw UnsupportedError('libllm: no build for $os'),
    };
    output.assets.code.add(CodeAsset(
      package: input.packageName,
      name: 'llm.dart',
      linkMode: DynamicLoadingBundled(),
      file: buildDir.resolve(file),
    ));
    output.dependencies.addAll([
      root.resolve('CMakeLists.txt'),
      root.resolve('lib/'),
      root.resolve('include/llm.h'),
    ]);
  });
}

Future<void> _run(String exe, List<String> args) async {
  final r = await Process.run(exe, args);
  if (r.exitCode != 0) {
    throw ProcessException(exe, args, '${r.stdout}\n${r.stderr}', r.exitCode);
  }
}
