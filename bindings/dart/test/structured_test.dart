// Structured output through the Dart binding on stories260K: JSON out of a schema (decoded and
// checked against it), a GBNF grammar, stop strings, log-probabilities and logit bias.
//
// UNVERIFIED like lib/llm.dart: no Dart SDK here, so this was never compiled. The same C calls in
// the same order run in CI as bindings/python/tests/test_dart_mirror.py (test_dart_mirror_structured).
// Run: LLM_LIBRARY=build/lib/libllm.so LLM_SHARED_DIR=../shared dart test bindings/dart/test
import 'dart:convert';
import 'dart:io';

import 'package:llm/llm.dart';
import 'package:test/test.dart';

const prompt = 'Once upon a time';

// A bounded object: every draw must close it within a few dozen tokens; then only the end remains.
const person = {
  'type': 'object',
  'properties': {
    'name': {'type': 'string', 'maxLength': 8},
    'age': {'type': 'integer', 'minimum': 0, 'maximum': 120},
  },
  'required': ['name', 'age'],
  'additionalProperties': false,
};

// JSON Schema's integer is any number without a fraction (15.0 is one: jsonDecode gives a double).
bool fitsPerson(Object? v) {
  if (v is! Map<String, dynamic> || v.length != 2) return false;
  final name = v['name'];
  final age = v['age'];
  return name is String && name.runes.length <= 8 && age is num && age == age.truncate() && age >= 0 && age <= 120;
}

void main() {
  final shared = Platform.environment['LLM_SHARED_DIR'] ?? '../../../shared';
  late Model model;
  setUpAll(() async => model = await Model.load(LlmLib.open(), '$shared/models/stories260K.gguf'));
  tearDownAll(() => model.close());

  test('JSON schema generation decodes and fits the schema', () async {
    for (var seed = 0; seed < 5; ++seed) {
      final s = Session(model, temperature: 1.0, seed: seed);
      s.setJsonSchema(person);
      final text = await s.generateText(prompt, 200);
      expect(s.lastStatus, llmDone, reason: text);
      expect(fitsPerson(jsonDecode(text)), isTrue, reason: text);
      await s.close();
    }
    final s = Session(model);
    expect(() => s.setJsonSchema({'type': 'object', 'not': {}}),
        throwsA(isA<LlmError>().having((e) => e.status, 'status', llmErrUnsupported)));
    s.setJsonSchema(null);
    await s.close();
  });

  test('a GBNF grammar; a bad one says where', () async {
    final s = Session(model, temperature: 1.0, seed: 3);
    s.setGrammar('root ::= "Lily" (" was" | " ran"){1,3} "."\n');
    final text = await s.generateText(prompt, 50);
    expect(RegExp(r'^Lily( was| ran){1,3}\.$').hasMatch(text), isTrue, reason: text);
    expect(() => s.setGrammar('root ::= [a-\n'),
        throwsA(isA<LlmError>().having((e) => e.message, 'message', contains('line 2, column 1'))));
    s.setGrammar(null);
    await s.close();
  });

  test('stop strings end generation before the stop text', () async {
    final plain = Session(model, temperature: 0);
    final full = await plain.generateText(prompt, 40);
    await plain.close();
    final s = Session(model, temperature: 0);
    s.setStop([' Lily', 'never there']);
    expect(await s.generateText(prompt, 40), full.substring(0, full.indexOf(' Lily')));
    expect(s.lastStatus, llmStopped);
    s.setStop([]);
    await s.close();
  });

  test('logprobs and logit bias', () async {
    final s = Session(model, temperature: 0);
    s.setLogprobs(3);
    // toList: the worker has finished (a synchronous call is refused while it runs)
    final first = (await s.generate(prompt, 1).toList()).first.token;
    final lp = s.logprobs();
    expect(lp.token, first);
    expect(lp.top.length, 3);
    expect(lp.top.first.token, first);
    expect(lp.logprob, lessThan(0));
    s.setLogprobs(null);
    await s.close();
    final banned = Session(model, temperature: 0);
    banned.setLogitBias({first: double.negativeInfinity});
    expect((await banned.generate(prompt, 1).toList()).first.token, isNot(first));
    await banned.close();
  });
}
