/// Dart FFI bindings for libllm, for Flutter and Dart VM hosts.
///
/// UNVERIFIED: no Dart SDK was reachable where this was written, so this file has never been
/// compiled. The call sequence it makes (functions, order, threads) is mirrored exactly by the
/// "dart_mirror" tests of the Python binding (bindings/python/tests/test_dart_mirror.py), which run
/// against the real library in CI.
///
/// Threads: loading and generation run on background isolates (Isolate.spawn), so the UI isolate
/// never blocks; they receive raw handle addresses and open the library themselves. The main
/// isolate owns the handles: it creates sessions, frees them, and may call [Session.cancel] while a
/// worker isolate is inside llm_session_next (the only call llm.h allows from another thread).
///
/// Chat (libllm 0.3): [Model.applyChatTemplate] renders a conversation with the model's own
/// template ([applyChatTemplate] with one of yours); a [Session] created with `parseSpecial: true`
/// turns the rendered special tokens into themselves.
///
/// Structured output (libllm 0.4): [Session.setJsonSchema] / [Session.setGrammar] (constrained
/// sampling), [Session.setStop] (stop strings; [Session.lastStatus]), [Session.setLogprobs] /
/// [Session.logprobs], [Session.setLogitBias], and the presencePenalty / frequencyPenalty options.
///
/// More than one token per pass (libllm 0.4): [Session.setSpeculation] (a draft model and/or prompt
/// lookup; lossless), [nextBatch] (one token for several sessions of one model in one pass, on a
/// background isolate), and the 'passes' / 'drafted_tokens' / 'accepted_tokens' keys of
/// [Session.stats].
library llm;

import 'dart:async';
import 'dart:convert';
import 'dart:ffi';
import 'dart:io' show Platform;
import 'dart:isolate';
import 'dart:typed_data';

import 'package:ffi/ffi.dart';

// ---- constants (llm.h) --------------------------------------------------------------------------

const int llmOk = 0;
const int llmDone = 1;
const int llmStopped = 2; // libllm 0.4: generation ended at a stop string (Session.setStop)
const int llmErrInvalidArgument = -1;
const int llmErrIo = -2;
const int llmErrFormat = -3;
const int llmErrUnsupported = -4;
const int llmErrOutOfMemory = -5;
const int llmErrContextFull = -6;
const int llmErrBufferTooSmall = -7;
const int llmErrCancelled = -8;
const int llmErrInternal = -9;
const int llmErrNotFound = -10; // no such metadata key or chat template (libllm 0.3)

const int llmResidencyResident = 0;
const int llmResidencyStreamed = 1;
const int llmResidencyBudget = 2;
const int llmPageCacheKeep = 0;
const int llmPageCacheDrop = 1;
const int llmPageCacheDirect = 2;
const int llmPageCacheMap = 3; // streamed weights mapped from the file, not copied (files only)

/// KV cache element types of a [Session] (llm_session_params.kv_type_k / kv_type_v).
enum KvType {
  /// Exact: the goldens' setting.
  f32(0),

  /// The default.
  f16(1),

  /// Blocks of 32 with one f16 scale: about half of f16.
  q8_0(2);

  const KvType(this.value);

  /// The LLM_KV_* value.
  final int value;
}

// The struct versions this binding was written for (llm.h 0.4): the *_init functions fill exactly
// these layouts, also in a newer libllm. (A libllm older than 0.3 refuses session params version 2.)
const int _modelParamsVersion = 3;
const int _sessionParamsVersion = 3; // 3 (libllm 0.4): penalties; a 0.3 libllm refuses it and gets 2
const int _logprobsParamsVersion = 1;
const int _memoryPlanVersion = 1;
const int _statsVersion = 2; // 2 (libllm 0.4); an older libllm refuses it and gets 1 (see stats)
const int _speculationParamsVersion = 1;
const int _pieceCap = 256;

// ---- struct layouts (must match llm.h; tests/abi_layout_test.c holds the LP64 table) --------------

typedef LlmProgressNative = Bool Function(Float fraction, Pointer<Void> user);

final class LlmModelHandle extends Opaque {}

final class LlmSessionHandle extends Opaque {}

/// llm_model_params, version 3: 48 bytes on LP64.
final class LlmModelParams extends Struct {
  @Uint32()
  external int version;
  @Int32()
  external int nThreads;
  external Pointer<NativeFunction<LlmProgressNative>> progress;
  external Pointer<Void> progressUser;
  @Bool()
  external bool vocabOnly;
  // version 2
  @Int32()
  external int residency;
  @Uint64()
  external int ramBudgetBytes;
  @Int32()
  external int prefetchDepth;
  // version 3
  @Int32()
  external int pageCache;
}

/// llm_session_params, version 3: 80 bytes on LP64.
final class LlmSessionParams extends Struct {
  @Uint32()
  external int version;
  @Int32()
  external int nCtx;
  @Int32()
  external int nThreads;
  @Float()
  external double temperature;
  @Int32()
  external int topK;
  @Float()
  external double topP;
  @Float()
  external double minP;
  @Float()
  external double repeatPenalty;
  @Int32()
  external int repeatLastN;
  @Uint64()
  external int seed;
  @Bool()
  external bool logitsAll;
  // version 2
  @Bool()
  external bool parseSpecial;
  @Int32()
  external int kvTypeK;
  @Int32()
  external int kvTypeV;
  @Bool()
  external bool contextShift;
  @Int32()
  external int nKeep;
  // version 3 (libllm 0.4)
  @Float()
  external double presencePenalty;
  @Float()
  external double frequencyPenalty;
}

/// llm_token_logprob: 8 bytes.
final class LlmTokenLogprob extends Struct {
  @Int32()
  external int token;
  @Float()
  external double logprob;
}

/// llm_logprobs_params, version 1 (libllm 0.4): 24 bytes on LP64. The binding uses the pull side
/// only (on_token stays NULL: it would run on the generation isolate's thread).
final class LlmLogprobsParams extends Struct {
  @Uint32()
  external int version;
  @Int32()
  external int nTop;
  external Pointer<Void> onToken;
  external Pointer<Void> user;
}

/// llm_chat_message: 16 bytes on LP64.
final class LlmChatMessage extends Struct {
  external Pointer<Utf8> role;
  external Pointer<Utf8> content;
}

/// llm_memory_plan, version 1: 80 bytes on LP64.
final class LlmMemoryPlan extends Struct {
  @Uint32()
  external int version;
  @Uint32()
  external int nLayer;
  @Uint32()
  external int nResidentLayers;
  @Uint32()
  external int nStreamSlots;
  @Uint64()
  external int residentBlockBytes;
  @Uint64()
  external int streamSlotBytes;
  @Uint64()
  external int lmHeadBytes;
  @Uint64()
  external int embeddingBytes;
  @Uint64()
  external int kvCacheBytes;
  @Uint64()
  external int scratchBytes;
  @Uint64()
  external int totalBytes;
  @Uint64()
  external int minimumWeightBytes;
}

/// llm_stats, version 2 (libllm 0.4): 88 bytes on LP64 (version 1 ends before [passes], at 64).
final class LlmStats extends Struct {
  @Uint32()
  external int version;
  @Uint64()
  external int promptTokens;
  @Uint64()
  external int generatedTokens;
  @Double()
  external double prefillSeconds;
  @Double()
  external double decodeSeconds;
  @Uint64()
  external int bytesRead;
  @Uint64()
  external int readCalls;
  @Double()
  external double ioWaitSeconds;
  // version 2 (libllm 0.4)
  @Uint64()
  external int passes;
  @Uint64()
  external int draftedTokens;
  @Uint64()
  external int acceptedTokens;
}

/// llm_speculation_params, version 1 (libllm 0.4): 32 bytes on LP64.
final class LlmSpeculationParams extends Struct {
  @Uint32()
  external int version;
  external Pointer<LlmModelHandle> draft;
  @Int32()
  external int nDraft;
  @Int32()
  external int lookupNgram;
  @Float()
  external double draftPMin;
}

/// llm_embed_params, version 1 (libllm 0.4): 12 bytes.
final class LlmEmbedParams extends Struct {
  @Uint32()
  external int version;
  @Int32()
  external int pooling;
  @Bool()
  external bool normalize;
  @Bool()
  external bool addBos;
  @Bool()
  external bool parseSpecial;
}

/// Embedding poolings of [Session.embed] (llama.cpp's values). Unspecified: the file's pooling_type.
const int llmPoolingUnspecified = -1;
const int llmPoolingNone = 0;
const int llmPoolingMean = 1;
const int llmPoolingCls = 2;
const int llmPoolingLast = 3;
const int llmPoolingRank = 4;
const int _embedParamsVersion = 1;

// ---- the functions --------------------------------------------------------------------------------

/// Every llm.h function this binding uses, looked up once per isolate.
class LlmLib {
  LlmLib._(this.path, DynamicLibrary l)
      : _dl = l,
        versionString = l.lookupFunction<Pointer<Utf8> Function(), Pointer<Utf8> Function()>(
            'llm_version_string'),
        statusString = l.lookupFunction<Pointer<Utf8> Function(Int32), Pointer<Utf8> Function(int)>(
            'llm_status_string'),
        lastError =
            l.lookupFunction<Pointer<Utf8> Function(), Pointer<Utf8> Function()>('llm_last_error'),
        modelParamsInit = l.lookupFunction<Int32 Function(Pointer<LlmModelParams>, Uint32),
            int Function(Pointer<LlmModelParams>, int)>('llm_model_params_init'),
        modelLoad = l.lookupFunction<
            Int32 Function(Pointer<Utf8>, Pointer<LlmModelParams>, Pointer<Pointer<LlmModelHandle>>),
            int Function(Pointer<Utf8>, Pointer<LlmModelParams>,
                Pointer<Pointer<LlmModelHandle>>)>('llm_model_load'),
        modelInfoJson = l.lookupFunction<Pointer<Utf8> Function(Pointer<LlmModelHandle>),
            Pointer<Utf8> Function(Pointer<LlmModelHandle>)>('llm_model_info_json'),
        modelSetRamBudget = l.lookupFunction<Int32 Function(Pointer<LlmModelHandle>, Uint64),
            int Function(Pointer<LlmModelHandle>, int)>('llm_model_set_ram_budget'),
        memoryPlanInit = l.lookupFunction<Int32 Function(Pointer<LlmMemoryPlan>, Uint32),
            int Function(Pointer<LlmMemoryPlan>, int)>('llm_memory_plan_init'),
        modelMemoryPlan = l.lookupFunction<
            Int32 Function(Pointer<LlmModelHandle>, Int32, Pointer<LlmMemoryPlan>),
            int Function(Pointer<LlmModelHandle>, int, Pointer<LlmMemoryPlan>)>('llm_model_memory_plan'),
        modelNVocab = l.lookupFunction<Int32 Function(Pointer<LlmModelHandle>),
            int Function(Pointer<LlmModelHandle>)>('llm_model_n_vocab'),
        tokenize = l.lookupFunction<
            Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Size, Bool, Bool, Pointer<Int32>,
                Int32, Pointer<Int32>),
            int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, int, bool, bool, Pointer<Int32>, int,
                Pointer<Int32>)>('llm_tokenize'),
        tokenToPiece = l.lookupFunction<
            Int32 Function(Pointer<LlmModelHandle>, Int32, Pointer<Uint8>, Size, Pointer<Size>),
            int Function(Pointer<LlmModelHandle>, int, Pointer<Uint8>, int,
                Pointer<Size>)>('llm_token_to_piece'),
        sessionParamsInit = l.lookupFunction<Int32 Function(Pointer<LlmSessionParams>, Uint32),
            int Function(Pointer<LlmSessionParams>, int)>('llm_session_params_init'),
        sessionCreate = l.lookupFunction<
            Int32 Function(
                Pointer<LlmModelHandle>, Pointer<LlmSessionParams>, Pointer<Pointer<LlmSessionHandle>>),
            int Function(Pointer<LlmModelHandle>, Pointer<LlmSessionParams>,
                Pointer<Pointer<LlmSessionHandle>>)>('llm_session_create'),
        sessionReset = l.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>),
            int Function(Pointer<LlmSessionHandle>)>('llm_session_reset'),
        sessionNPast = l.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>),
            int Function(Pointer<LlmSessionHandle>)>('llm_session_n_past'),
        sessionPrefill = l.lookupFunction<
            Int32 Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Size),
            int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, int)>('llm_session_prefill'),
        sessionNext = l.lookupFunction<
            Int32 Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Uint8>, Size, Pointer<Size>),
            int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Uint8>, int,
                Pointer<Size>)>('llm_session_next'),
        sessionCancel = l.lookupFunction<Void Function(Pointer<LlmSessionHandle>),
            void Function(Pointer<LlmSessionHandle>)>('llm_session_cancel'),
        statsInit = l.lookupFunction<Int32 Function(Pointer<LlmStats>, Uint32),
            int Function(Pointer<LlmStats>, int)>('llm_stats_init'),
        sessionStats = l.lookupFunction<
            Int32 Function(Pointer<LlmSessionHandle>, Pointer<LlmStats>, Pointer<LlmStats>),
            int Function(
                Pointer<LlmSessionHandle>, Pointer<LlmStats>, Pointer<LlmStats>)>('llm_session_stats'),
        modelFreePtr = l.lookup<NativeFinalizerFunction>('llm_model_free'),
        sessionFreePtr = l.lookup<NativeFinalizerFunction>('llm_session_free');

  /// Opens libllm, one instance per path and isolate, kept for the isolate's lifetime (its
  /// NativeFinalizers must stay reachable to run). An explicit [path] ('' is the process itself:
  /// iOS, statically linked) is opened as given; otherwise the same lookup as the other bindings:
  /// `LLM_LIBRARY` (a file), `LLM_LIB_DIR` (a directory), then the platform's name for the dynamic
  /// loader's own search — `libllm.so.0` on Linux (the libllm0 package, or the copy hook/build.dart
  /// bundles), `libllm.so` on Android (jniLibs), `libllm.0.dylib` on macOS, `llm.dll` on Windows.
  /// The error names every candidate tried.
  factory LlmLib.open([String? path]) {
    if (path != null) {
      return _opened[path] ??=
          LlmLib._(path, path == '' ? DynamicLibrary.process() : DynamicLibrary.open(path));
    }
    final tried = <String>[];
    for (final p in _candidates()) {
      final known = _opened[p];
      if (known != null) return known;
      try {
        return _opened[p] = LlmLib._(p, DynamicLibrary.open(p));
      } on ArgumentError catch (e) {
        tried.add('$p ($e)');
      }
    }
    throw ArgumentError('libllm not found; tried ${tried.join('; ')}. Install the libllm0 package, '
        'bundle libllm with the app, or set LLM_LIBRARY to its path');
  }

  static const _names = {
    'linux': ['libllm.so.0', 'libllm.so'],
    'android': ['libllm.so'],
    'macos': ['libllm.0.dylib', 'libllm.dylib'],
    'windows': ['llm.dll'],
  };

  static List<String> _candidates() {
    final env = Platform.environment;
    final file = env['LLM_LIBRARY'];
    if (file != null && file.isNotEmpty) return [file];
    final names = _names[Platform.operatingSystem] ?? const ['libllm.so.0'];
    final dir = env['LLM_LIB_DIR'];
    return [
      if (dir != null && dir.isNotEmpty) ...names.map((n) => '$dir/$n'),
      ...names,
    ];
  }

  static final Map<String, LlmLib> _opened = {};

  /// Calls llm_model_free / llm_session_free for handles whose Dart objects were collected.
  late final NativeFinalizer modelFinalizer = NativeFinalizer(modelFreePtr);
  late final NativeFinalizer sessionFinalizer = NativeFinalizer(sessionFreePtr);

  final String path;
  final DynamicLibrary _dl;
  final Pointer<Utf8> Function() versionString;
  final Pointer<Utf8> Function(int) statusString;
  final Pointer<Utf8> Function() lastError;
  final int Function(Pointer<LlmModelParams>, int) modelParamsInit;
  final int Function(Pointer<Utf8>, Pointer<LlmModelParams>, Pointer<Pointer<LlmModelHandle>>) modelLoad;
  final Pointer<Utf8> Function(Pointer<LlmModelHandle>) modelInfoJson;
  final int Function(Pointer<LlmModelHandle>, int) modelSetRamBudget;
  final int Function(Pointer<LlmMemoryPlan>, int) memoryPlanInit;
  final int Function(Pointer<LlmModelHandle>, int, Pointer<LlmMemoryPlan>) modelMemoryPlan;
  final int Function(Pointer<LlmModelHandle>) modelNVocab;
  final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, int, bool, bool, Pointer<Int32>, int,
      Pointer<Int32>) tokenize;
  final int Function(Pointer<LlmModelHandle>, int, Pointer<Uint8>, int, Pointer<Size>) tokenToPiece;
  final int Function(Pointer<LlmSessionParams>, int) sessionParamsInit;
  final int Function(
      Pointer<LlmModelHandle>, Pointer<LlmSessionParams>, Pointer<Pointer<LlmSessionHandle>>) sessionCreate;
  final int Function(Pointer<LlmSessionHandle>) sessionReset;
  final int Function(Pointer<LlmSessionHandle>) sessionNPast;
  final int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, int) sessionPrefill;
  final int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Uint8>, int, Pointer<Size>)
      sessionNext;
  final void Function(Pointer<LlmSessionHandle>) sessionCancel;
  final int Function(Pointer<LlmStats>, int) statsInit;
  final int Function(Pointer<LlmSessionHandle>, Pointer<LlmStats>, Pointer<LlmStats>) sessionStats;
  final Pointer<NativeFinalizerFunction> modelFreePtr;
  final Pointer<NativeFinalizerFunction> sessionFreePtr;

  // libllm 0.3: looked up on first use, so a binding on an older libllm works until one is called
  // (the lookup then throws an ArgumentError naming the symbol).
  late final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, int, Pointer<Size>)
      modelMetaString = _dl.lookupFunction<
          Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Size, Pointer<Size>),
          int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, int,
              Pointer<Size>)>('llm_model_meta_string');
  late final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, int, Pointer<Size>)
      modelChatTemplate = _dl.lookupFunction<
          Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Size, Pointer<Size>),
          int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, int,
              Pointer<Size>)>('llm_model_chat_template');
  late final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<LlmChatMessage>, int, bool,
          Pointer<Utf8>, int, Pointer<Size>) chatApplyTemplate =
      _dl.lookupFunction<
          Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<LlmChatMessage>, Size, Bool,
              Pointer<Utf8>, Size, Pointer<Size>),
          int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<LlmChatMessage>, int, bool,
              Pointer<Utf8>, int, Pointer<Size>)>('llm_chat_apply_template');
  // 0.4: tools in chat templates; looked up on first use (an older library has neither).
  late final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, int,
          Pointer<Size>) chatApplyTemplateJson =
      _dl.lookupFunction<
          Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, Size,
              Pointer<Size>),
          int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, int,
              Pointer<Size>)>('llm_chat_apply_template_json');
  late final int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>,
          int, Pointer<Size>) chatParse =
      _dl.lookupFunction<
          Int32 Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>,
              Size, Pointer<Size>),
          int Function(Pointer<LlmModelHandle>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>, Pointer<Utf8>,
              int, Pointer<Size>)>('llm_chat_parse');
  late final int Function(Pointer<LlmSessionHandle>, int) sessionTruncate = _dl.lookupFunction<
      Int32 Function(Pointer<LlmSessionHandle>, Int32),
      int Function(Pointer<LlmSessionHandle>, int)>('llm_session_truncate');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, int, Pointer<Int32>) sessionTokens =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Int32, Pointer<Int32>),
          int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, int, Pointer<Int32>)>('llm_session_tokens');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>) sessionSave = _dl.lookupFunction<
      Int32 Function(Pointer<LlmSessionHandle>, Pointer<Utf8>),
      int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>)>('llm_session_save');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>) sessionLoad = _dl.lookupFunction<
      Int32 Function(Pointer<LlmSessionHandle>, Pointer<Utf8>),
      int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>)>('llm_session_load');

  // libllm 0.4, looked up on first use as the 0.3 functions.
  late final int Function(Pointer<LlmSpeculationParams>, int) speculationParamsInit = _dl.lookupFunction<
      Int32 Function(Pointer<LlmSpeculationParams>, Uint32),
      int Function(Pointer<LlmSpeculationParams>, int)>('llm_speculation_params_init');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<LlmSpeculationParams>) sessionSetSpeculation =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<LlmSpeculationParams>),
          int Function(Pointer<LlmSessionHandle>, Pointer<LlmSpeculationParams>)>('llm_session_set_speculation');
  late final int Function(Pointer<Pointer<LlmSessionHandle>>, int, Pointer<Int32>, Pointer<Int32>)
      sessionNextBatch = _dl.lookupFunction<
          Int32 Function(Pointer<Pointer<LlmSessionHandle>>, Int32, Pointer<Int32>, Pointer<Int32>),
          int Function(Pointer<Pointer<LlmSessionHandle>>, int, Pointer<Int32>, Pointer<Int32>)>(
          'llm_session_next_batch');

  // libllm 0.4: structured output.
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>, Pointer<Utf8>) sessionSetGrammar =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<Utf8>, Pointer<Utf8>),
          int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>, Pointer<Utf8>)>('llm_session_set_grammar');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>) sessionSetJsonSchema = _dl.lookupFunction<
      Int32 Function(Pointer<LlmSessionHandle>, Pointer<Utf8>),
      int Function(Pointer<LlmSessionHandle>, Pointer<Utf8>)>('llm_session_set_json_schema');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, int) sessionSetStop =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, Size),
          int Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, int)>('llm_session_set_stop');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>, int) sessionSetLogitBias =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>, Size),
          int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>, int)>('llm_session_set_logit_bias');
  late final int Function(Pointer<LlmLogprobsParams>, int) logprobsParamsInit = _dl.lookupFunction<
      Int32 Function(Pointer<LlmLogprobsParams>, Uint32),
      int Function(Pointer<LlmLogprobsParams>, int)>('llm_logprobs_params_init');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<LlmLogprobsParams>) sessionSetLogprobs =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<LlmLogprobsParams>),
          int Function(Pointer<LlmSessionHandle>, Pointer<LlmLogprobsParams>)>('llm_session_set_logprobs');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>,
          Pointer<Pointer<LlmTokenLogprob>>, Pointer<Int32>) sessionLogprobs =
      _dl.lookupFunction<
          Int32 Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>, Pointer<Pointer<LlmTokenLogprob>>,
              Pointer<Int32>),
          int Function(Pointer<LlmSessionHandle>, Pointer<Int32>, Pointer<Float>, Pointer<Pointer<LlmTokenLogprob>>,
              Pointer<Int32>)>('llm_session_logprobs');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Uint8>, int, Pointer<Size>) sessionFlushHeld =
      _dl.lookupFunction<Int32 Function(Pointer<LlmSessionHandle>, Pointer<Uint8>, Size, Pointer<Size>),
          int Function(Pointer<LlmSessionHandle>, Pointer<Uint8>, int, Pointer<Size>)>('llm_session_flush_held');

  /// Whether the library has stop strings (libllm 0.4): the generation worker flushes held text.
  late final bool hasStopStrings = _dl.providesSymbol('llm_session_flush_held');

  late final int Function(Pointer<LlmEmbedParams>, int) embedParamsInit = _dl.lookupFunction<
      Int32 Function(Pointer<LlmEmbedParams>, Uint32), int Function(Pointer<LlmEmbedParams>, int)>(
      'llm_embed_params_init');
  late final int Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, int, Pointer<LlmEmbedParams>,
          Pointer<Float>, int, Pointer<Size>, Pointer<Int32>, Pointer<Int32>) sessionEmbed =
      _dl.lookupFunction<
          Int32 Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, Size, Pointer<LlmEmbedParams>,
              Pointer<Float>, Size, Pointer<Size>, Pointer<Int32>, Pointer<Int32>),
          int Function(Pointer<LlmSessionHandle>, Pointer<Pointer<Utf8>>, int, Pointer<LlmEmbedParams>,
              Pointer<Float>, int, Pointer<Size>, Pointer<Int32>, Pointer<Int32>)>('llm_session_embed');

  /// Throws [LlmError] for a negative status. Must run synchronously right after the call (no
  /// `await` in between): llm_last_error() is thread-local and an isolate may change OS thread
  /// between events.
  int check(int status) {
    if (status < 0) throw LlmError(status, lastError().toDartString());
    return status;
  }
}

/// A failed libllm call: [status] is the LLM_ERR_* code, [message] is llm_last_error().
class LlmError implements Exception {
  LlmError(this.status, this.message);
  final int status;
  final String message;
  @override
  String toString() => 'LlmError($status): $message';
}

// llm.h's string-out protocol: a call with cap 0 gives the length, a second one with length + 1
// bytes the string. null for LLM_ERR_NOT_FOUND; other errors throw (read right after the call).
String? _stringOut(LlmLib lib, int Function(Pointer<Utf8> buf, int cap, Pointer<Size> len) call) {
  final len = calloc<Size>();
  try {
    var status = call(nullptr, 0, len);
    while (true) {
      if (status == llmErrNotFound) return null;
      if (status != llmErrBufferTooSmall) lib.check(status);
      final cap = len.value + 1;
      final buf = calloc<Uint8>(cap);
      try {
        status = call(buf.cast<Utf8>(), cap, len);
        if (status == llmErrBufferTooSmall) continue;
        if (status == llmErrNotFound) return null;
        lib.check(status);
        return utf8.decode(buf.asTypedList(len.value), allowMalformed: true);
      } finally {
        calloc.free(buf);
      }
    }
  } finally {
    calloc.free(len);
  }
}

String _renderChat(LlmLib lib, Pointer<LlmModelHandle> m, String? template,
    List<(String, String)> messages, bool addAssistant) {
  return using((Arena arena) {
    final Pointer<Utf8> tmpl = template == null ? nullptr : template.toNativeUtf8(allocator: arena);
    final msgs = arena<LlmChatMessage>(messages.isEmpty ? 1 : messages.length);
    for (var i = 0; i < messages.length; i++) {
      final (role, content) = messages[i];
      msgs[i].role = role.toNativeUtf8(allocator: arena);
      msgs[i].content = content.toNativeUtf8(allocator: arena);
    }
    final out = _stringOut(lib,
        (buf, cap, len) => lib.chatApplyTemplate(m, tmpl, msgs, messages.length, addAssistant, buf, cap, len));
    if (out == null) throw LlmError(llmErrNotFound, 'the model has no chat template');
    return out;
  });
}

/// Renders [messages] ((role, content) pairs) with the Jinja chat [template] as Hugging Face's
/// apply_chat_template(tokenize=False) does, without a model (bos_token and eos_token are '').
/// [addAssistant] ends with the opening of an assistant turn. Synchronous.
String applyChatTemplate(LlmLib lib, String template, List<(String, String)> messages,
        {bool addAssistant = true}) =>
    _renderChat(lib, nullptr, template, messages, addAssistant);

/// Renders a request in Hugging Face's apply_chat_template form (llm_chat_apply_template_json):
/// {messages, tools, documents, add_generation_prompt, ...other template variables} as a Map (or
/// its JSON text), messages passed as given (assistant tool_calls, role 'tool' with tool_call_id and
/// name). [model] gives the BOS/EOS texts and, without [template], its own template. Synchronous.
String applyChatTemplateJson(LlmLib lib, Object request, {String? template, Model? model}) {
  if (template == null && model == null) {
    throw ArgumentError('applyChatTemplateJson: give a template or a model');
  }
  return using((Arena arena) {
    final Pointer<Utf8> tmpl = template == null ? nullptr : template.toNativeUtf8(allocator: arena);
    final req = (request is String ? request : jsonEncode(request)).toNativeUtf8(allocator: arena);
    final Pointer<LlmModelHandle> m = model == null ? nullptr : model.handle;
    final out = _stringOut(lib, (buf, cap, len) => lib.chatApplyTemplateJson(m, tmpl, req, buf, cap, len));
    if (out == null) throw LlmError(llmErrNotFound, 'the model has no chat template');
    return out;
  });
}

/// Parses a model's raw output (llm_chat_parse) into {content, reasoning_content,
/// tool_calls: [{name, arguments (JSON text), id}], format, parsed}, the tool-call format read off
/// the template (parsed false when unknown: the text is then the content). [params]: a Map (or JSON
/// text) with the request's tools, messages, reasoning_format, enable_thinking,
/// continue_final_message, is_partial. Synchronous.
Map<String, dynamic> chatParse(LlmLib lib, String raw, {String? template, Model? model, Object? params}) {
  if (template == null && model == null) throw ArgumentError('chatParse: give a template or a model');
  return using((Arena arena) {
    final Pointer<Utf8> tmpl = template == null ? nullptr : template.toNativeUtf8(allocator: arena);
    final r = raw.toNativeUtf8(allocator: arena);
    final Pointer<Utf8> p = params == null
        ? nullptr
        : (params is String ? params : jsonEncode(params)).toNativeUtf8(allocator: arena);
    final Pointer<LlmModelHandle> m = model == null ? nullptr : model.handle;
    final out = _stringOut(lib, (buf, cap, len) => lib.chatParse(m, tmpl, r, p, buf, cap, len));
    if (out == null) throw LlmError(llmErrNotFound, 'the model has no chat template');
    return jsonDecode(out) as Map<String, dynamic>;
  });
}

// ---- model ----------------------------------------------------------------------------------------

/// A loaded model: immutable and shareable by sessions. Freed by [close], or by a NativeFinalizer
/// calling llm_model_free once it is unreachable -- but only while it has no open [Session]
/// (llm.h requires sessions to be freed first, and finalizers run in no particular order).
class Model implements Finalizable {
  Model._(this.lib, this._h) {
    _finalizer.attach(this, _h.cast(), detach: this);
  }

  final LlmLib lib;
  Pointer<LlmModelHandle> _h;
  int _openSessions = 0;
  NativeFinalizer get _finalizer => lib.modelFinalizer;

  /// Loads [path] on a background isolate. [onProgress] receives load fractions on this isolate.
  /// Completing [cancel] (if given) makes the load fail with [llmErrCancelled].
  static Future<Model> load(LlmLib lib, String path,
      {int nThreads = 0,
      int residency = llmResidencyResident,
      int ramBudgetBytes = 0,
      void Function(double fraction)? onProgress,
      Future<void>? cancel}) async {
    // The worker's progress callback polls this flag: it is the only way to reach a thread that is
    // blocked inside llm_model_load.
    final cancelFlag = calloc<Int32>();
    final port = ReceivePort();
    var finished = false;
    cancel?.then((_) {
      if (!finished) cancelFlag.value = 1;
    });
    try {
      await Isolate.spawn(_loadWorker, [
        port.sendPort, lib.path, path, nThreads, residency, ramBudgetBytes, cancelFlag.address,
      ], onExit: port.sendPort);
      await for (final msg in port) {
        if (msg == null) break; // the worker exited without a result (it threw)
        final m = msg as List<Object?>;
        if (m[0] == 'progress') {
          onProgress?.call(m[1] as double);
          continue;
        }
        final status = m[1] as int;
        if (status < 0) throw LlmError(status, m[3] as String);
        return Model._(lib, Pointer<LlmModelHandle>.fromAddress(m[2] as int));
      }
      throw StateError('load worker exited without a result');
    } finally {
      finished = true;
      port.close();
      calloc.free(cancelFlag);
    }
  }

  Pointer<LlmModelHandle> get handle {
    if (_h == nullptr) throw LlmError(llmErrInvalidArgument, 'the model is closed');
    return _h;
  }

  /// Frees the model now. Every session on it must be closed first.
  void close() {
    if (_h == nullptr) return;
    if (_openSessions > 0) throw StateError('close the sessions of this model first');
    _finalizer.detach(this);
    final h = _h;
    _h = nullptr;
    _free(lib, h);
  }

  static void _free(LlmLib lib, Pointer<LlmModelHandle> h) {
    lib.modelFreePtr
        .cast<NativeFunction<Void Function(Pointer<LlmModelHandle>)>>()
        .asFunction<void Function(Pointer<LlmModelHandle>)>()(h);
  }

  // A session's lifetime pins the model: no finalizer may free it while a session is open.
  void _retain() {
    if (_openSessions++ == 0) _finalizer.detach(this);
  }

  void _release() {
    if (--_openSessions == 0 && _h != nullptr) _finalizer.attach(this, _h.cast(), detach: this);
  }

  String infoJson() => lib.modelInfoJson(handle).toDartString();

  int get nVocab => lib.modelNVocab(handle);

  Map<String, int> memoryPlan([int nCtx = 0]) {
    final p = calloc<LlmMemoryPlan>();
    try {
      lib.check(lib.memoryPlanInit(p, _memoryPlanVersion));
      lib.check(lib.modelMemoryPlan(handle, nCtx, p));
      final r = p.ref;
      return {
        'n_layer': r.nLayer,
        'kv_cache_bytes': r.kvCacheBytes,
        'total_bytes': r.totalBytes,
        'minimum_weight_bytes': r.minimumWeightBytes,
      };
    } finally {
      calloc.free(p);
    }
  }

  /// The run-time RAM dial (e.g. from didHaveMemoryPressure); only while no generation runs.
  void setRamBudget(int bytes) => lib.check(lib.modelSetRamBudget(handle, bytes));

  /// The GGUF metadata value of [key] (e.g. 'general.architecture') as a string: numbers in
  /// decimal, booleans 'true'/'false'. null if the file has no such key.
  String? metaString(String key) => using((Arena arena) {
        final k = key.toNativeUtf8(allocator: arena);
        return _stringOut(lib, (buf, cap, len) => lib.modelMetaString(handle, k, buf, cap, len));
      });

  /// The model's chat template (Jinja source), or the one called [name]
  /// (tokenizer.chat_template.<name>); null if the file has none.
  String? chatTemplate([String? name]) => using((Arena arena) {
        final Pointer<Utf8> n = name == null ? nullptr : name.toNativeUtf8(allocator: arena);
        return _stringOut(lib, (buf, cap, len) => lib.modelChatTemplate(handle, n, buf, cap, len));
      });

  /// Renders [messages] ((role, content) pairs) with the model's chat template, or with [template]
  /// and this model's BOS/EOS texts. Throws [LlmError] with [llmErrNotFound] when the model has no
  /// template and none is given. Generate from it with a session created with `parseSpecial: true`.
  String applyChatTemplate(List<(String, String)> messages, {bool addAssistant = true, String? template}) =>
      _renderChat(lib, handle, template, messages, addAssistant);
}

// Runs on the load isolate. Message: [sendPort, libPath, modelPath, nThreads, residency,
// ramBudgetBytes, cancelFlagAddress]. Replies ['progress', f]* then ['done', status, address, error].
SendPort? _progressPort;

bool _onProgress(double fraction, Pointer<Void> user) {
  _progressPort?.send(['progress', fraction]);
  return user.cast<Int32>().value == 0;
}

void _loadWorker(List<Object?> a) {
  final port = a[0] as SendPort;
  final lib = LlmLib.open(a[1] as String);
  _progressPort = port;
  final p = calloc<LlmModelParams>();
  final out = calloc<Pointer<LlmModelHandle>>();
  final path = (a[2] as String).toNativeUtf8();
  try {
    // A refusal (a libllm older than this binding) leaves version 0, which modelLoad reports.
    lib.modelParamsInit(p, _modelParamsVersion);
    p.ref.nThreads = a[3] as int;
    p.ref.residency = a[4] as int;
    p.ref.ramBudgetBytes = a[5] as int;
    p.ref.progress = Pointer.fromFunction<LlmProgressNative>(_onProgress, false);
    p.ref.progressUser = Pointer<Void>.fromAddress(a[6] as int);
    final status = lib.modelLoad(path, p, out);
    final error = status < 0 ? lib.lastError().toDartString() : '';
    port.send(['done', status, status < 0 ? 0 : out.value.address, error]);
  } finally {
    calloc.free(path);
    calloc.free(out);
    calloc.free(p);
  }
}

// ---- session --------------------------------------------------------------------------------------

/// One generated token and its bytes (a UTF-8 character may span several pieces: decode the
/// concatenation, or use [Session.generateText]).
class Piece {
  Piece(this.token, this.bytes);
  final int token;
  final Uint8List bytes;
}

/// A conversation (KV cache + sampler) on a [Model]. Created and freed on the isolate that owns it;
/// generation runs on a background isolate; [cancel] may be called at any time.
class Session implements Finalizable {
  Session._(this.model, this._h, this.parseSpecial) {
    model._retain();
    _finalizer.attach(this, _h.cast(), detach: this);
  }

  /// Creates a session (synchronous; cheap: allocates the KV cache).
  factory Session(Model model,
      {int nCtx = 0,
      int nThreads = 0,
      double temperature = 0.8,
      int topK = 40,
      double topP = 0.95,
      double minP = 0.05,
      int seed = 0,
      bool parseSpecial = false,
      KvType kvTypeK = KvType.f16,
      KvType kvTypeV = KvType.f16,
      bool contextShift = false,
      int nKeep = 0,
      double presencePenalty = 0,
      double frequencyPenalty = 0}) {
    final lib = model.lib;
    final p = calloc<LlmSessionParams>();
    final out = calloc<Pointer<LlmSessionHandle>>();
    try {
      if (lib.sessionParamsInit(p, _sessionParamsVersion) == llmErrInvalidArgument) {
        // libllm 0.3: version 2, whose struct ends before the penalties
        lib.check(lib.sessionParamsInit(p, 2));
        if (presencePenalty != 0 || frequencyPenalty != 0) {
          throw LlmError(llmErrUnsupported, 'this libllm has no presence/frequency penalties (0.4)');
        }
      } else {
        p.ref
          ..presencePenalty = presencePenalty
          ..frequencyPenalty = frequencyPenalty;
      }
      p.ref
        ..nCtx = nCtx
        ..nThreads = nThreads
        ..temperature = temperature
        ..topK = topK
        ..topP = topP
        ..minP = minP
        ..seed = seed
        ..parseSpecial = parseSpecial
        ..kvTypeK = kvTypeK.value
        ..kvTypeV = kvTypeV.value
        ..contextShift = contextShift
        ..nKeep = nKeep;
      lib.check(lib.sessionCreate(model.handle, p, out));
      return Session._(model, out.value, parseSpecial);
    } finally {
      calloc.free(out);
      calloc.free(p);
    }
  }

  final Model model;

  /// Prompts of [generate] are tokenized with control-token text (a rendered chat template's
  /// "<|im_start|>") as those tokens.
  final bool parseSpecial;
  Pointer<LlmSessionHandle> _h;
  Future<void>? _running;

  /// How the last [generate] ended: [llmDone], [llmStopped] (a stop string) or [llmOk] (maxTokens).
  int lastStatus = llmOk;
  NativeFinalizer get _finalizer => model.lib.sessionFinalizer;

  Pointer<LlmSessionHandle> get handle {
    if (_h == nullptr) throw LlmError(llmErrInvalidArgument, 'the session is closed');
    return _h;
  }

  /// Stops a running [generate] at the next layer boundary (its stream ends with an [LlmError]
  /// whose status is [llmErrCancelled]); the session stays usable (call [reset] or continue).
  void cancel() {
    if (_h != nullptr) model.lib.sessionCancel(_h);
  }

  void reset() => model.lib.check(model.lib.sessionReset(handle));

  int get nPast => model.lib.sessionNPast(handle);

  void _idle() {
    if (_running != null) throw StateError('a call is running on this session');
  }

  /// Drops the context from position [nPast] on (to edit or regenerate a turn); generate with new
  /// text before sampling again. Not while [generate] runs.
  void truncate(int nPast) {
    _idle();
    model.lib.check(model.lib.sessionTruncate(handle, nPast));
  }

  /// The tokens in the context ([nPast] of them), in order. Not while [generate] runs.
  List<int> tokens() {
    _idle();
    final lib = model.lib;
    final n = calloc<Int32>();
    try {
      var status = lib.sessionTokens(handle, nullptr, 0, n);
      while (true) {
        if (status != llmErrBufferTooSmall) lib.check(status);
        final cap = n.value;
        final buf = calloc<Int32>(cap == 0 ? 1 : cap);
        try {
          status = lib.sessionTokens(handle, buf, cap, n);
          if (status == llmErrBufferTooSmall) continue;
          lib.check(status);
          return List<int>.of(buf.asTypedList(n.value));
        } finally {
          calloc.free(buf);
        }
      }
    } finally {
      calloc.free(n);
    }
  }

  /// Saves the conversation (tokens, KV cache, sampler and RNG state) to [path], on a background
  /// isolate (a long context is megabytes). Not while [generate] runs.
  Future<void> save(String path) => _state(path, true);

  /// Restores a conversation saved by [save] on the same model file, on a background isolate; on
  /// failure the session is left as it was.
  Future<void> load(String path) => _state(path, false);

  Future<void> _state(String path, bool save) async {
    _idle();
    final libPath = model.lib.path;
    final address = handle.address;
    final done = Completer<void>();
    _running = done.future;
    try {
      final r = await _runState(libPath, address, path, save);
      if (r.$1 < 0) throw LlmError(r.$1, r.$2);
    } finally {
      _running = null;
      done.complete();
    }
  }

  /// Cancels a running generation, waits for its isolate to leave the library, then frees.
  Future<void> close() async {
    if (_h == nullptr) return;
    final running = _running;
    if (running != null) {
      cancel();
      await running.catchError((_) {});
    }
    if (_h == nullptr) return;
    _finalizer.detach(this);
    final h = _h;
    _h = nullptr;
    model.lib.sessionFreePtr
        .cast<NativeFunction<Void Function(Pointer<LlmSessionHandle>)>>()
        .asFunction<void Function(Pointer<LlmSessionHandle>)>()(h);
    model._release();
  }

  /// Generates up to [maxTokens] tokens after [prompt] (tokenized with BOS when the session is
  /// empty; "" continues) on a background isolate, through the pull API llm_session_next. The
  /// stream ends at an end-of-generation token, a stop string ([setStop]; [lastStatus] says which)
  /// or after maxTokens, or with an [LlmError]. With stop strings, text held back while it might
  /// begin one comes last, as a [Piece] with token -1.
  Stream<Piece> generate(String prompt, int maxTokens) {
    if (_running != null) throw StateError('a generation is already running on this session');
    final controller = StreamController<Piece>();
    final port = ReceivePort();
    final done = Completer<void>();
    _running = done.future;
    // Keep the session (and so its handle) reachable until the worker has finished with it.
    final self = this;
    port.listen((msg) {
      // ['piece', token, bytes]* then ['done', status, error]; null if the worker died before 'done'
      final m = msg as List<Object?>?;
      if (m != null && m[0] == 'piece') {
        controller.add(Piece(m[1] as int, m[2] as Uint8List));
        return;
      }
      final status = m == null ? llmErrInternal : m[1] as int;
      if (status >= 0) self.lastStatus = status;
      port.close();
      self._running = null;
      done.complete();
      if (status < 0) {
        controller.addError(LlmError(status, m == null ? 'generation isolate exited' : m[2] as String));
      }
      controller.close();
    });
    Isolate.spawn(_generateWorker, [
      port.sendPort, model.lib.path, model.handle.address, handle.address, prompt, maxTokens, parseSpecial,
    ], onExit: port.sendPort).catchError((Object e) {
      port.close();
      _running = null;
      done.complete();
      controller.addError(e);
      controller.close();
      return Isolate.current;
    });
    return controller.stream;
  }

  /// [generate], decoded and joined.
  Future<String> generateText(String prompt, int maxTokens) async {
    final bytes = BytesBuilder(copy: false);
    await for (final p in generate(prompt, maxTokens)) {
      bytes.add(p.bytes);
    }
    return utf8.decode(bytes.takeBytes(), allowMalformed: true);
  }

  /// The counters since creation or reset. 'passes', 'drafted_tokens' and 'accepted_tokens'
  /// (libllm 0.4) are absent with an older libllm, which refuses llm_stats version 2 (1 is used).
  Map<String, num> stats() {
    final total = calloc<LlmStats>();
    try {
      final lib = model.lib;
      var version = _statsVersion;
      if (lib.statsInit(total, version) == llmErrInvalidArgument) version = 1;
      lib.check(lib.statsInit(total, version));
      lib.check(lib.sessionStats(handle, total, nullptr));
      final t = total.ref;
      return {
        'prompt_tokens': t.promptTokens,
        'generated_tokens': t.generatedTokens,
        'prefill_seconds': t.prefillSeconds,
        'decode_seconds': t.decodeSeconds,
        if (version >= 2) ...{
          'passes': t.passes,
          'drafted_tokens': t.draftedTokens,
          'accepted_tokens': t.acceptedTokens,
        },
      };
    } finally {
      calloc.free(total);
    }
  }

  /// Speculative decoding for [generate] from now on (llm_session_set_speculation, libllm 0.4):
  /// [draft] (a model with this model's vocabulary) and/or prompt lookup ([lookupNgram] > 0) propose
  /// tokens that one evaluation pass checks; lossless (greedy output is identical). Arguments left
  /// null keep llm_speculation_params_init's defaults (no draft, nDraft 8, lookupNgram 0,
  /// draftPMin 0); with neither a draft nor lookup it is off. The library keeps its own reference
  /// to the draft, so draft.close() afterwards is fine. Synchronous; not while [generate] runs.
  void setSpeculation({Model? draft, int? nDraft, int? lookupNgram, double? draftPMin}) {
    _idle();
    final lib = model.lib;
    final p = calloc<LlmSpeculationParams>();
    try {
      lib.check(lib.speculationParamsInit(p, _speculationParamsVersion));
      if (draft != null) p.ref.draft = draft.handle;
      if (nDraft != null) p.ref.nDraft = nDraft;
      if (lookupNgram != null) p.ref.lookupNgram = lookupNgram;
      if (draftPMin != null) p.ref.draftPMin = draftPMin;
      lib.check(lib.sessionSetSpeculation(handle, p));
    } finally {
      calloc.free(p);
    }
  }

  // ---- structured output (libllm 0.4); synchronous, not while [generate] runs ----

  void _withText(String? text, int Function(Pointer<Utf8>) call) {
    final p = text == null ? nullptr : text.toNativeUtf8();
    try {
      model.lib.check(call(p.cast()));
    } finally {
      if (p != nullptr) calloc.free(p);
    }
  }

  /// Samples only text of the GBNF grammar [gbnf] (llama.cpp's syntax) from rule [root] (null:
  /// "root") from the next token on; end-of-generation only where the language may end. null
  /// removes it. A bad grammar throws [LlmError] ([llmErrInvalidArgument]) saying where.
  void setGrammar(String? gbnf, {String? root}) {
    _idle();
    final r = root == null ? nullptr : root.toNativeUtf8();
    try {
      _withText(gbnf, (g) => model.lib.sessionSetGrammar(handle, g, r.cast()));
    } finally {
      if (r != nullptr) calloc.free(r);
    }
  }

  /// [setGrammar] with the grammar of a JSON schema (a Map or its JSON text): the output is JSON
  /// the schema accepts. null removes it; an unsupported keyword throws [llmErrUnsupported].
  void setJsonSchema(Object? schema) {
    _idle();
    final text = schema == null ? null : (schema is String ? schema : jsonEncode(schema));
    _withText(text, (t) => model.lib.sessionSetJsonSchema(handle, t));
  }

  /// [generate] ends at the first occurrence of any of [stops] ([lastStatus] [llmStopped]); the stop
  /// text is neither handed out nor left in the context. An empty list turns them off.
  void setStop(List<String> stops) {
    _idle();
    final arr = calloc<Pointer<Utf8>>(stops.isEmpty ? 1 : stops.length);
    try {
      for (var i = 0; i < stops.length; ++i) {
        arr[i] = stops[i].toNativeUtf8();
      }
      model.lib.check(model.lib.sessionSetStop(handle, stops.isEmpty ? nullptr : arr, stops.length));
    } finally {
      for (var i = 0; i < stops.length; ++i) {
        calloc.free(arr[i]);
      }
      calloc.free(arr);
    }
  }

  /// Adds bias[token] to that token's logit for every later sample (double.negativeInfinity bans
  /// it); replaces the previous map, an empty one removes it.
  void setLogitBias(Map<int, double> bias) {
    _idle();
    final n = bias.length;
    final toks = calloc<Int32>(n == 0 ? 1 : n);
    final vals = calloc<Float>(n == 0 ? 1 : n);
    try {
      var i = 0;
      bias.forEach((t, b) {
        toks[i] = t;
        vals[i] = b;
        ++i;
      });
      model.lib.check(model.lib.sessionSetLogitBias(handle, toks, vals, n));
    } finally {
      calloc.free(vals);
      calloc.free(toks);
    }
  }

  /// Every later sampled token gets its log-probability and the [nTop] most likely alternatives
  /// (read them with [logprobs]); null turns them off.
  void setLogprobs(int? nTop) {
    _idle();
    final lib = model.lib;
    if (nTop == null) {
      lib.check(lib.sessionSetLogprobs(handle, nullptr));
      return;
    }
    final p = calloc<LlmLogprobsParams>();
    try {
      lib.check(lib.logprobsParamsInit(p, _logprobsParamsVersion));
      p.ref.nTop = nTop;
      lib.check(lib.sessionSetLogprobs(handle, p));
    } finally {
      calloc.free(p);
    }
  }

  /// The last sampled token, its log-probability and its top alternatives (most likely first).
  ({int token, double logprob, List<({int token, double logprob})> top}) logprobs() {
    _idle();
    final lib = model.lib;
    final tok = calloc<Int32>();
    final lp = calloc<Float>();
    final top = calloc<Pointer<LlmTokenLogprob>>();
    final n = calloc<Int32>();
    try {
      lib.check(lib.sessionLogprobs(handle, tok, lp, top, n));
      final alts = [
        for (var i = 0; i < n.value; ++i) (token: top.value[i].token, logprob: top.value[i].logprob),
      ];
      return (token: tok.value, logprob: lp.value, top: alts);
    } finally {
      calloc.free(n);
      calloc.free(top);
      calloc.free(lp);
      calloc.free(tok);
    }
  }

  /// Embeddings (llm_session_embed, libllm 0.4), synchronous on this isolate: per text a Float32List
  /// of its pooled vector, or with [llmPoolingNone] its tokens' rows one after another (length
  /// n_tokens * dim). [pooling]: an llmPooling* value ([llmPoolingUnspecified]: the file's
  /// pooling_type, else none); [normalize]: L2 per row. The texts share the evaluation passes; the
  /// session's context is left as it was.
  List<Float32List> embed(List<String> texts, {int pooling = llmPoolingUnspecified, bool normalize = false}) {
    _idle();
    if (texts.isEmpty) throw LlmError(llmErrInvalidArgument, 'embed: no texts');
    final lib = model.lib;
    final p = calloc<LlmEmbedParams>();
    final ptrs = calloc<Pointer<Utf8>>(texts.length);
    final rows = calloc<Int32>(texts.length);
    final n = calloc<Size>();
    final dim = calloc<Int32>();
    Pointer<Float> out = nullptr;
    try {
      for (var i = 0; i < texts.length; i++) {
        ptrs[i] = texts[i].toNativeUtf8(allocator: calloc);
      }
      lib.check(lib.embedParamsInit(p, _embedParamsVersion));
      p.ref.pooling = pooling;
      p.ref.normalize = normalize;
      final st = lib.sessionEmbed(handle, ptrs, texts.length, p, nullptr, 0, n, dim, rows);
      if (st != llmErrBufferTooSmall) lib.check(st);
      out = calloc<Float>(n.value == 0 ? 1 : n.value);
      lib.check(lib.sessionEmbed(handle, ptrs, texts.length, p, out, n.value, n, dim, rows));
      final all = out.asTypedList(n.value);
      final result = <Float32List>[];
      var at = 0;
      for (var i = 0; i < texts.length; i++) {
        final len = rows[i] * dim.value;
        result.add(Float32List.fromList(all.sublist(at, at + len)));
        at += len;
      }
      return result;
    } finally {
      for (var i = 0; i < texts.length; i++) {
        if (ptrs[i] != nullptr) calloc.free(ptrs[i]);
      }
      if (out != nullptr) calloc.free(out);
      calloc.free(p);
      calloc.free(ptrs);
      calloc.free(rows);
      calloc.free(n);
      calloc.free(dim);
    }
  }
}

/// Advances every session in [sessions] (distinct, all on one model) by one token in one evaluation
/// pass (llm_session_next_batch, libllm 0.4) on a background isolate, each sampling as generate's
/// pull step would. Returns (token, status) per session in order: status [llmOk] (accepted),
/// [llmDone] (an end-of-generation token, not accepted) or an LLM_ERR_* of that session alone
/// (e.g. [llmErrContextFull]); Model.tokenToPiece gives the bytes. Throws [LlmError] only when the
/// whole call failed and no session changed (no sessions, a repeated one, sessions on different
/// models, [llmErrCancelled]). Not while any of them runs [Session.generate].
Future<List<(int, int)>> nextBatch(List<Session> sessions) async {
  if (sessions.isEmpty) throw LlmError(llmErrInvalidArgument, 'nextBatch: no sessions');
  for (final s in sessions) {
    s._idle();
  }
  final libPath = sessions[0].model.lib.path;
  final addresses = [for (final s in sessions) s.handle.address];
  final done = Completer<void>();
  final distinct = sessions.toSet();
  for (final s in distinct) {
    s._running = done.future;
  }
  try {
    final r = await _runBatch(libPath, addresses);
    if (r.$1 < 0) throw LlmError(r.$1, r.$2);
    return [for (var i = 0; i < sessions.length; i++) (r.$3[i], r.$4[i])];
  } finally {
    for (final s in distinct) {
      s._running = null;
    }
    done.complete();
  }
}

Future<(int, String, List<int>, List<int>)> _runBatch(String libPath, List<int> addresses) =>
    Isolate.run(() => _batchWorker(libPath, addresses));

// Runs on a background isolate (Isolate.run): llm_session_next_batch over calloc'd arrays, and the
// error message read on the same thread right after a failure. Returns (status, error, tokens,
// statuses).
(int, String, List<int>, List<int>) _batchWorker(String libPath, List<int> addresses) {
  final lib = LlmLib.open(libPath);
  final n = addresses.length;
  final handles = calloc<Pointer<LlmSessionHandle>>(n);
  final tokens = calloc<Int32>(n);
  final statuses = calloc<Int32>(n);
  try {
    for (var i = 0; i < n; i++) {
      handles[i] = Pointer<LlmSessionHandle>.fromAddress(addresses[i]);
    }
    final status = lib.sessionNextBatch(handles, n, tokens, statuses);
    if (status < 0) return (status, lib.lastError().toDartString(), const [], const []);
    return (status, '', List<int>.of(tokens.asTypedList(n)), List<int>.of(statuses.asTypedList(n)));
  } finally {
    calloc.free(statuses);
    calloc.free(tokens);
    calloc.free(handles);
  }
}

// A static function, so the closure sent to the isolate captures only these four values (a closure
// made inside an instance method may capture `this`, which cannot be sent).
Future<(int, String)> _runState(String libPath, int address, String path, bool save) =>
    Isolate.run(() => _stateWorker(libPath, address, path, save));

// Runs on a background isolate (Isolate.run): llm_session_save or llm_session_load, and the error
// message read on the same thread right after a failure. Returns (status, error).
(int, String) _stateWorker(String libPath, int sessionAddress, String path, bool save) {
  final lib = LlmLib.open(libPath);
  final s = Pointer<LlmSessionHandle>.fromAddress(sessionAddress);
  final p = path.toNativeUtf8();
  try {
    final status = save ? lib.sessionSave(s, p) : lib.sessionLoad(s, p);
    return (status, status < 0 ? lib.lastError().toDartString() : '');
  } finally {
    calloc.free(p);
  }
}

// Runs on the generation isolate. Message: [sendPort, libPath, modelAddress, sessionAddress, prompt,
// maxTokens, parseSpecial]. Replies ['piece', token, bytes]* then ['done', status, error]. The sequence of calls
// is the one bindings/python/tests/test_dart_mirror.py replays.
void _generateWorker(List<Object?> a) {
  final port = a[0] as SendPort;
  final lib = LlmLib.open(a[1] as String);
  final m = Pointer<LlmModelHandle>.fromAddress(a[2] as int);
  final s = Pointer<LlmSessionHandle>.fromAddress(a[3] as int);
  final prompt = a[4] as String;
  final maxTokens = a[5] as int;
  final parseSpecial = a[6] as bool;
  final tok = calloc<Int32>();
  final len = calloc<Size>();
  final piece = calloc<Uint8>(_pieceCap);
  var status = llmOk;
  var error = '';
  try {
    if (prompt.isNotEmpty) {
      // 1. tokenize (BOS only into an empty context), growing the buffer once if it is too small
      final text = prompt.toNativeUtf8();
      final textLen = text.length;
      final addBos = lib.sessionNPast(s) == 0;
      var cap = textLen + 8;
      var tokens = calloc<Int32>(cap);
      final n = calloc<Int32>();
      try {
        status = lib.tokenize(m, text, textLen, addBos, parseSpecial, tokens, cap, n);
        if (status == llmErrBufferTooSmall) {
          calloc.free(tokens);
          cap = n.value;
          tokens = calloc<Int32>(cap);
          status = lib.tokenize(m, text, textLen, addBos, parseSpecial, tokens, cap, n);
        }
        // 2. prefill the prompt
        if (status >= 0) status = lib.sessionPrefill(s, tokens, n.value);
        if (status < 0) error = lib.lastError().toDartString();
      } finally {
        calloc.free(n);
        calloc.free(tokens);
        calloc.free(text);
      }
    }
    // 3. the pull loop: one llm_session_next per token, each piece sent to the owning isolate
    for (var i = 0; status >= 0 && i < maxTokens; ++i) {
      status = lib.sessionNext(s, tok, piece, _pieceCap, len);
      if (status == llmErrBufferTooSmall) {
        // the token was accepted; fetch its bytes with a big enough buffer: with stop strings the
        // library holds them (flush_held), otherwise they are the token's piece
        final big = calloc<Uint8>(len.value);
        final want = len.value;
        status = lib.hasStopStrings ? lib.sessionFlushHeld(s, big, want, len) : llmOk;
        if (status >= 0 && (!lib.hasStopStrings || len.value == 0)) status = lib.tokenToPiece(m, tok.value, big, want, len);
        if (status >= 0) port.send(['piece', tok.value, Uint8List.fromList(big.asTypedList(len.value))]);
        calloc.free(big);
      } else if (status == llmDone || status == llmStopped) {
        // with stop strings, the text held back comes with the end
        if (len.value > 0) port.send(['piece', -1, Uint8List.fromList(piece.asTypedList(len.value))]);
        break;
      } else if (status >= 0) {
        port.send(['piece', tok.value, Uint8List.fromList(piece.asTypedList(len.value))]);
      }
      if (status < 0) error = lib.lastError().toDartString();
    }
    // 4. at maxTokens, text still held back for stop strings (libllm 0.4; none without them)
    if (status == llmOk && lib.hasStopStrings) {
      final st = lib.sessionFlushHeld(s, nullptr, 0, len);
      if (st == llmErrBufferTooSmall) {
        final held = calloc<Uint8>(len.value);
        if (lib.sessionFlushHeld(s, held, len.value, len) >= 0) {
          port.send(['piece', -1, Uint8List.fromList(held.asTypedList(len.value))]);
        }
        calloc.free(held);
      }
    }
  } finally {
    calloc.free(piece);
    calloc.free(len);
    calloc.free(tok);
  }
  port.send(['done', status, error]);
}
