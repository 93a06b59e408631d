// dart run example/generate.dart path/to/libllm.so path/to/stories260K.gguf
import 'dart:io';

import 'package:llm/llm.dart';

Future<void> main(List<String> args) async {
  final lib = LlmLib.open(args[0]);
  final model = await Model.load(lib, args[1], onProgress: (f) => stderr.write('\rload ${(f * 100).round()}%'));
  stderr.writeln();
  final session = Session(model, temperature: 0);
  final text = await session.generateText('Once upon a time', 32);
  stdout.writeln(text);
  // cancel: start a long generation and stop it from this isolate after the first piece
  try {
    await for (final _ in session.generate('', 10000)) {
      session.cancel();
    }
  } on LlmError catch (e) {
    stderr.writeln('stopped: $e');
  }
  await session.close();
  model.close();
}
