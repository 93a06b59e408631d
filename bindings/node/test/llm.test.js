'use strict';
// The Node binding against this build's libllm (LLM_LIBRARY) on stories260K (LLM_SHARED_DIR).
// Run: node --test test/   (ctest: bindings_node, through run_tests.sh)
const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');
const llm = require('..');

const SHARED = process.env.LLM_SHARED_DIR || path.join(__dirname, '..', '..', '..', '..', 'shared');
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
const PROMPT = 'Once upon a time';
// What the C API generates greedily from PROMPT (tests/test_boundary.cpp kStory, c_api_test.c).
const STORY = ', there was a little girl named Lily. She loved to play outside in the park. One day, she saw';

test('struct layouts match llm.h (LP64, tests/abi_layout_test.c)', () => {
    const size = (name) => koffi.sizeof(name);
    const off = (name, field) => koffi.offsetof(name, field);
    assert.equal(size('llm_model_params'), 48);
    assert.equal(off('llm_model_params', 'residency'), 28);
    assert.equal(off('llm_model_params', 'ram_budget_bytes'), 32);
    assert.equal(off('llm_model_params', 'prefetch_depth'), 40);
    assert.equal(off('llm_model_params', 'page_cache'), 44);
    assert.equal(size('llm_session_params'), 80);
    assert.equal(off('llm_session_params', 'presence_penalty'), 68);
    assert.equal(off('llm_session_params', 'frequency_penalty'), 72);
    assert.equal(size('llm_logprobs_params'), 24);
    assert.equal(off('llm_logprobs_params', 'on_token'), 8);
    assert.equal(size('llm_token_logprob'), 8);
    assert.equal(off('llm_session_params', 'seed'), 40);
    assert.equal(off('llm_session_params', 'logits_all'), 48);
    assert.equal(off('llm_session_params', 'parse_special'), 49);
    assert.equal(off('llm_session_params', 'kv_type_k'), 52);
    assert.equal(off('llm_session_params', 'kv_type_v'), 56);
    assert.equal(off('llm_session_params', 'context_shift'), 60);
    assert.equal(off('llm_session_params', 'n_keep'), 64);
    assert.equal(size('llm_chat_message'), 16);
    assert.equal(size('llm_writer'), 24);
    assert.equal(size('llm_io'), 48);
    assert.equal(off('llm_io', 'flags'), 40);
    assert.equal(size('llm_memory_plan'), 80);
    assert.equal(off('llm_memory_plan', 'minimum_weight_bytes'), 72);
    assert.equal(size('llm_stats'), 88);
    assert.equal(off('llm_stats', 'io_wait_seconds'), 56);
    assert.equal(off('llm_stats', 'passes'), 64);
    assert.equal(off('llm_stats', 'accepted_tokens'), 80);
    assert.equal(size('llm_speculation_params'), 32);
    assert.equal(off('llm_speculation_params', 'draft'), 8);
    assert.equal(off('llm_speculation_params', 'n_draft'), 16);
    assert.equal(off('llm_speculation_params', 'lookup_ngram'), 20);
    assert.equal(off('llm_speculation_params', 'draft_p_min'), 24);
    assert.equal(size('llm_embed_params'), 12);
    assert.equal(off('llm_embed_params', 'pooling'), 4);
    assert.equal(off('llm_embed_params', 'parse_special'), 10);
});

test('params init fills the defaults of llm.h', () => {
    const m = llm.loadModelSync(MODEL);
    const s = m.createSession(); // default params: valid, accepted by llm_session_create
    s.free();
    m.free();
    const { _initParams } = llm;
    const mp = _initParams('model');
    assert.equal(mp.version, 3);
    assert.equal(mp.prefetch_depth, 1);
    assert.equal(mp.residency, llm.RESIDENCY_RESIDENT);
    const sp = _initParams('session');
    assert.equal(sp.version, 3);
    assert.equal(sp.presence_penalty, 0);
    assert.equal(sp.frequency_penalty, 0);
    assert.ok(Math.abs(sp.temperature - 0.8) < 1e-6);
    assert.equal(sp.parse_special, false);
    assert.equal(sp.kv_type_k, llm.KV_F16);
    assert.equal(sp.kv_type_v, llm.KV_F16);
    assert.equal(sp.context_shift, false);
    assert.equal(sp.n_keep, 0);
    assert.equal(sp.top_k, 40);
    assert.equal(sp.repeat_last_n, 64);
});

test('errors carry the status and llm_last_error', async () => {
    const missing = path.join(SHARED, 'models', 'no-such-model.gguf');
    assert.throws(() => llm.loadModelSync(missing), (e) => {
        assert.ok(e instanceof llm.LlmError);
        assert.equal(e.status, llm.ERR_IO);
        assert.match(e.detail, /no-such-model/);
        return true;
    });
    // The async load reports the same message (worker threads cannot read llm_last_error).
    await assert.rejects(llm.loadModel(missing), (e) => {
        assert.equal(e.status, llm.ERR_IO);
        assert.match(e.detail, /no-such-model/);
        return true;
    });
    const bad = Buffer.from('GGUF this is not a model');
    assert.throws(() => llm.loadModelIo(bad), (e) => e.status === llm.ERR_FORMAT && e.detail.length > 0);
});

test('progress returning false cancels an async load; a throw is rethrown', async () => {
    await assert.rejects(llm.loadModel(MODEL, { progress: () => false }), (e) => e.status === llm.ERR_CANCELLED);
    await assert.rejects(llm.loadModel(MODEL, { progress: () => { throw new RangeError('stop'); } }), RangeError);
});

describe('stories260K', () => {
    let model;
    const fractions = [];

    before(async () => {
        model = await llm.loadModel(MODEL, { progress: (f) => { fractions.push(f); } });
    });
    after(() => model.free());

    test('version, model facts, tokenize and detokenize', () => {
        // The library's version is the one of the header it was built from.
        const header = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'include', 'llm.h'), 'utf8');
        const part = (name) => header.match(new RegExp(`#define LLM_VERSION_${name} (\\d+)`))[1];
        assert.equal(llm.version(), `${part('MAJOR')}.${part('MINOR')}.${part('PATCH')}`);
        assert.ok(fractions.length > 0 && fractions.every((f) => f >= 0 && f <= 1));
        assert.equal(model.nVocab, 512);
        assert.equal(model.bos, 1);
        assert.ok(model.isEog(model.eos));
        assert.equal(model.info().arch, 'llama');
        assert.ok(model.memoryPlan(128).kv_cache_bytes > 0);
        const toks = model.tokenize(PROMPT);
        assert.equal(toks.length, 5);
        assert.equal(toks[0], 1);
        assert.equal(model.detokenize(toks.slice(1)).trim(), PROMPT);
        assert.deepEqual(model.tokenize(PROMPT, { addBos: false }), toks.slice(1));
        assert.equal(model.tokenToPiece(model.eos).length, 0); // control tokens print nothing
    });

    test('greedy generation as an async iterator gives the C API text', async () => {
        const s = model.createSession({ temperature: 0, nCtx: 256 });
        try {
            const steps = [];
            for await (const step of s.generate(PROMPT, { maxTokens: 32 })) steps.push(step);
            assert.equal(steps.length, 32);
            assert.ok(steps.every((x) => Number.isInteger(x.token) && typeof x.text === 'string'));
            const text = steps.map((x) => x.text).join('');
            assert.ok(text.startsWith(STORY), text);
            assert.equal(s.nPast, 5 + 32);
            assert.equal(s.stats().total.generated_tokens, 32);
            assert.equal(s.statsJson().generated_tokens, 32);
            // '' continues from the context.
            const more = await s.complete('', { maxTokens: 4 });
            assert.equal(s.nPast, 5 + 36);
            assert.ok(more.length > 0);
        } finally {
            s.free();
        }
    });

    test('the JS thread stays free while a token is generated', async () => {
        const s = model.createSession({ temperature: 0 });
        let ticks = 0;
        const timer = setInterval(() => ticks++, 0);
        try {
            const text = await s.complete(PROMPT, { maxTokens: 64 });
            assert.ok(text.startsWith(STORY));
        } finally {
            clearInterval(timer);
            s.free();
        }
        assert.ok(ticks > 0, 'timers ran during generation');
        // A long prefill runs on a worker: the event loop turns (setImmediate) before it settles.
        const s2 = model.createSession({ temperature: 0, nCtx: 2048 });
        try {
            const long = model.tokenize(' Once upon a time there was a little girl.'.repeat(120));
            assert.ok(long.length > 1000);
            let turned = false;
            setImmediate(() => (turned = true));
            await s2.prefill(long);
            assert.ok(turned, 'the event loop ran while the prefill computed');
            assert.equal(s2.nPast, long.length);
        } finally {
            s2.free();
        }
    });

    test('AbortSignal cancels mid-generation; the session stays usable', async () => {
        const s = model.createSession({ temperature: 0 });
        try {
            const ac = new AbortController();
            const seen = [];
            await assert.rejects(async () => {
                for await (const step of s.generate(PROMPT, { maxTokens: 200, signal: ac.signal })) {
                    seen.push(step.text);
                    if (seen.length === 3) ac.abort();
                }
            }, (e) => e.name === 'AbortError');
            assert.equal(seen.length, 3);
            assert.ok(STORY.startsWith(seen.join('')));
            assert.equal(s.nPast, 5 + 3); // nothing past the cancelled step
            // An abort before the iterator got the session: it throws signal.reason without a step.
            const ac2 = new AbortController();
            const it = s.generate('', { maxTokens: 200, signal: ac2.signal });
            const pending = it.next();
            ac2.abort(new Error('user stop'));
            await assert.rejects(pending, /user stop/);
            assert.equal(s.nPast, 5 + 3);
            // An abort right after a step was requested reaches libllm (the step is queued or running,
            // or has just finished: then the next step takes the pending cancel). Nothing leaks.
            s.reset();
            const ac4 = new AbortController();
            const it4 = s.generate(PROMPT, { maxTokens: 100, signal: ac4.signal });
            await it4.next();
            const p4 = it4.next();
            ac4.abort();
            const seen4 = [];
            await assert.rejects(async () => {
                for (let r = await p4; !r.done; r = await it4.next()) seen4.push(r.value);
            }, (e) => e.name === 'AbortError');
            assert.ok(seen4.length <= 1);
            assert.equal(s.nPast, 5 + 1 + seen4.length);
            await s.prefill(model.tokenize(' and', { addBos: false }));
            assert.notEqual(await s.next(), undefined); // not cancelled by a leftover
            // The race the loop guards against, forced: the cancel reaches libllm as its step returns,
            // then the loop is left with break. The pending cancel is taken before the session is
            // handed on, so a bare continuation goes on (it would fail with ERR_CANCELLED otherwise).
            s.reset();
            const ac5 = new AbortController();
            let n5 = 0;
            for await (const step of s.generate(PROMPT, { maxTokens: 50, signal: ac5.signal })) {
                assert.ok(step);
                if (++n5 === 3) {
                    s._inFlight++; // as if the step were still running on its worker
                    ac5.abort();
                    s._inFlight--;
                    break;
                }
            }
            assert.equal(s.nPast, 5 + 3);
            const cont = await s.complete('', { maxTokens: 4 });
            assert.equal(s.nPast, 5 + 7);
            assert.ok(cont.length > 0);
            // An already-aborted signal never starts.
            await assert.rejects(s.complete(PROMPT, { signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
            s.reset();
            assert.ok((await s.complete(PROMPT, { maxTokens: 32 })).startsWith(STORY));
        } finally {
            s.free();
        }
    });

    test('pull steps, prefill and context-full errors', async () => {
        const s = model.createSession({ temperature: 0, nCtx: 8 });
        try {
            await s.prefill(model.tokenize(PROMPT));
            const step = await s.next();
            assert.equal(step.bytes.toString(), model.tokenToPiece(step.token).toString());
            assert.equal(s.nPast, 6);
            await assert.rejects(s.prefill([1, 2, 3, 4, 5]), (e) => {
                assert.equal(e.status, llm.ERR_CONTEXT_FULL);
                assert.ok(e.detail.length > 0);
                // libllm keeps a per-session message (llm_session_last_error): the worker's failure reports it.
                assert.ok(llm.lib().session_last_error, 'this libllm has no llm_session_last_error');
                assert.notEqual(e.detail, 'context full', e.detail);
                return true;
            });
            assert.equal(s.nPast, 6);
        } finally {
            s.free();
        }
    });

    test('concurrent calls on one session are serialized; two sessions run side by side', async () => {
        const a = model.createSession({ temperature: 0 });
        const b = model.createSession({ temperature: 0 });
        try {
            const texts = await Promise.all([a.complete(PROMPT, { maxTokens: 32 }), b.complete(PROMPT, { maxTokens: 32 }),
                a.complete('', { maxTokens: 8 })]);
            assert.ok(texts[0].startsWith(STORY));
            assert.ok(texts[1].startsWith(STORY));
            assert.equal(a.nPast, 5 + 40);
        } finally {
            a.free();
            b.free();
        }
    });

    test('free is idempotent; freed handles throw; a session outlives its model', async () => {
        const m = llm.loadModelSync(MODEL);
        const s = m.createSession({ temperature: 0 });
        m.free();
        m.free();
        assert.ok(m.freed);
        assert.throws(() => m.nVocab, (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        assert.ok((await s.complete(PROMPT, { maxTokens: 32 })).startsWith(STORY));
        s.free();
        s.free();
        assert.throws(() => s.nPast, (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        // free() during a running generation cancels it and frees the handle once it returns.
        const s2 = model.createSession({ temperature: 0 });
        const it = s2.generate(PROMPT, { maxTokens: 200 });
        await it.next();
        const pending = it.next(); // the step starts on a worker
        s2.free();
        // Either the cancel lands inside the step, or the step ends first and the next one is refused.
        await assert.rejects(pending.then(() => it.next()),
            (e) => e.status === llm.ERR_CANCELLED || e.status === llm.ERR_INVALID_ARGUMENT);
        assert.ok(s2.freed);
        assert.equal(s2._h, null, 'the handle was released');
        // free() between steps releases at once; the suspended generator then fails its next step.
        const s3 = model.createSession({ temperature: 0 });
        const it3 = s3.generate(PROMPT, { maxTokens: 200 });
        await it3.next();
        s3.free();
        assert.equal(s3._h, null);
        await assert.rejects(it3.next(), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
    });
});

const model_tokens = (m, text) => m.tokenize(text, { addBos: false }).length;

test('models and sessions dropped without free() are released by the garbage collector', { skip: !global.gc && 'needs --expose-gc' }, async () => {
    let closed = 0;
    const data = fs.readFileSync(MODEL);
    (() => {
        const m = llm.loadModelIo({ size: data.length, readAt: (o, d) => data.copy(d, 0, o, o + d.length), close: () => closed++ },
            { closeSource: true });
        m.createSession({ temperature: 0 });
    })();
    for (let i = 0; i < 20 && closed === 0; i++) {
        global.gc();
        await new Promise((r) => setTimeout(r, 10));
    }
    assert.equal(closed, 1, 'the io source was closed: model and session were freed');
});

describe('llm_io sources from JS', () => {
    const expected = async (m) => {
        const s = m.createSession({ temperature: 0 });
        try {
            return await s.complete(PROMPT, { maxTokens: 48 });
        } finally {
            s.free();
        }
    };

    test('a Buffer, a FileHandle and a custom reader load and generate the path-load text', async () => {
        const ref = llm.loadModelSync(MODEL);
        const want = await expected(ref);
        ref.free();
        assert.ok(want.startsWith(STORY));

        const fromBuffer = llm.loadModelIo(fs.readFileSync(MODEL));
        assert.equal(await expected(fromBuffer), want);
        fromBuffer.free();

        const fh = await fs.promises.open(MODEL, 'r');
        try {
            // Streamed: every block is read through read_at during generation, from the worker.
            const streamed = llm.loadModelIo(fh, { residency: llm.RESIDENCY_STREAMED });
            assert.equal(streamed.info().memory.residency, 'streamed');
            assert.equal(streamed.info().memory.prefetch_depth, 0); // reads only inside calls
            assert.equal(await expected(streamed), want);
            streamed.free();
        } finally {
            await fh.close();
        }

        const data = fs.readFileSync(MODEL);
        let reads = 0;
        const custom = llm.loadModelIo({
            size: data.length,
            readAt(offset, dst) {
                reads++;
                data.copy(dst, 0, offset, offset + dst.length);
            },
        }, { residency: llm.RESIDENCY_STREAMED });
        const before = reads;
        assert.equal(await expected(custom), want);
        assert.ok(reads > before, 'generation read through the JS reader');
        custom.free();
    });

    test('an abort landing inside a step (from a JS read) cancels it and rolls it back', async () => {
        const data = fs.readFileSync(MODEL);
        const ac = new AbortController();
        let armed = false;
        let abortedInRead = false;
        const m = llm.loadModelIo({
            size: data.length,
            readAt(offset, dst) {
                // Runs on the JS thread while the worker is inside llm_session_next, waiting for it.
                if (armed) {
                    armed = false;
                    abortedInRead = true;
                    ac.abort();
                }
                data.copy(dst, 0, offset, offset + dst.length);
            },
        }, { residency: llm.RESIDENCY_STREAMED });
        const s = m.createSession({ temperature: 0 });
        try {
            const seen = [];
            await assert.rejects(async () => {
                for await (const step of s.generate(PROMPT, { maxTokens: 100, signal: ac.signal })) {
                    seen.push(step.text);
                    if (seen.length === 2) armed = true;
                }
            }, (e) => e.name === 'AbortError');
            assert.ok(abortedInRead);
            assert.equal(seen.length, 2);
            assert.equal(s.nPast, 5 + 2); // the cancelled step left nothing behind
            assert.ok(STORY.startsWith(seen.join('')));
            // The cancelled step's logits are gone (llm.h): a bare continuation is refused, new text goes on.
            await assert.rejects(s.complete('', { maxTokens: 4 }), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
            assert.equal(s.nPast, 5 + 2);
            assert.ok((await s.complete(' and', { maxTokens: 4 })).length > 0);
            assert.equal(s.nPast, 5 + 2 + model_tokens(m, ' and') + 4);
        } finally {
            s.free();
            m.free();
        }
    });

    test('a reader that throws gives ERR_IO with the JS error as cause', () => {
        const data = fs.readFileSync(MODEL);
        let n = 0;
        const src = {
            size: data.length,
            readAt(offset, dst) {
                if (++n > 2) throw new Error('disk gone');
                data.copy(dst, 0, offset, offset + dst.length);
            },
        };
        assert.throws(() => llm.loadModelIo(src), (e) => {
            assert.equal(e.status, llm.ERR_IO);
            assert.match(e.cause.message, /disk gone/);
            return true;
        });
    });
});

// A short ChatML template and what Python's Jinja2 renders for MESSAGES (trim_blocks, lstrip_blocks).
const CHATML = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" +
    '{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';
const MESSAGES = [['system', 'You are terse.'], { role: 'user', content: 'Hi!' }];
const RENDERED = '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n';

describe('libllm 0.3: metadata, chat templates, parse_special, truncate/tokens, saved sessions', () => {
    let model;
    before(() => {
        model = llm.loadModelSync(MODEL);
    });
    after(() => model.free());

    test('metaString; null for a missing key and for a missing chat template', () => {
        assert.equal(model.metaString('general.architecture'), 'llama');
        assert.equal(model.metaString('llama.block_count'), '5');
        assert.equal(model.metaString('general.no_such_key'), null);
        assert.equal(model.chatTemplate(), null); // stories260K has none
        assert.equal(model.chatTemplate('tool_use'), null);
        assert.throws(() => model.applyChatTemplate(MESSAGES), (e) => e.status === llm.ERR_NOT_FOUND);
    });

    test('tools: render with tools, parse the call, render the call and its result', () => {
        const tmpl = '{% for m in messages %}<{{ m.role }}>{% if m.tool_calls %}<tool_call>' +
            '{{ m.tool_calls[0].function|tojson }}</tool_call>{% else %}{{ m.content }}{% endif %}{% endfor %}' +
            '{% if tools %}[{{ tools[0].function.name }}]{% endif %}{% if add_generation_prompt %}<assistant>{% endif %}';
        const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }];
        const messages = [{ role: 'user', content: 'Paris?' }];
        assert.equal(llm.applyChatTemplateJson({ messages, tools, add_generation_prompt: true }, { template: tmpl }),
            '<user>Paris?[get_weather]<assistant>');
        const reply = 'Let me look.<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>';
        const msg = llm.chatParse(reply, { template: tmpl, params: { tools } });
        assert.equal(msg.content, 'Let me look.');
        assert.equal(msg.format, 'hermes');
        assert.equal(msg.tool_calls[0].name, 'get_weather');
        assert.deepEqual(JSON.parse(msg.tool_calls[0].arguments), { city: 'Paris' });
        messages.push({ role: 'assistant', content: null, tool_calls: [{ type: 'function',
            function: { name: 'get_weather', arguments: JSON.parse(msg.tool_calls[0].arguments) } }] },
        { role: 'tool', name: 'get_weather', content: '12C' });
        assert.equal(llm.applyChatTemplateJson({ messages, add_generation_prompt: true }, { template: tmpl }),
            '<user>Paris?<assistant><tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>' +
            '<tool>12C<assistant>');
        assert.throws(() => llm.applyChatTemplateJson('{"messages": 3}', { template: tmpl }),
            (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        assert.throws(() => llm.chatParse('x', { template: tmpl, params: '{"tools": 3}' }),
            (e) => e.status === llm.ERR_INVALID_ARGUMENT);
    });

    test('applyChatTemplate renders as Jinja2', () => {
        assert.equal(llm.applyChatTemplate(CHATML, MESSAGES), RENDERED);
        assert.equal(llm.applyChatTemplate(CHATML, MESSAGES, { addAssistant: false }),
            RENDERED.slice(0, -'<|im_start|>assistant\n'.length));
        assert.equal(model.applyChatTemplate(MESSAGES, { template: '{{ bos_token }}' + CHATML }), '<s>' + RENDERED);
        assert.throws(() => llm.applyChatTemplate('{% for m in messages %}', MESSAGES), (e) => e.status === llm.ERR_FORMAT);
        assert.throws(() => llm.applyChatTemplate(CHATML, [['user']]), TypeError);
    });

    test('parseSpecial, KV types and context shift are session options', async () => {
        const eos = model.eos;
        const expect = [...model.tokenize(PROMPT), eos];
        const s = model.createSession({ temperature: 0, nCtx: 64, parseSpecial: true });
        try {
            await s.complete(PROMPT + '</s>', { maxTokens: 1 });
            assert.deepEqual(s.tokens().slice(0, 6), expect);
        } finally {
            s.free();
        }
        const plain = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            await plain.complete(PROMPT + '</s>', { maxTokens: 1 });
            assert.ok(!plain.tokens().includes(eos));
        } finally {
            plain.free();
        }
        const f32 = model.createSession({ temperature: 0, nCtx: 64, kvTypeK: llm.KV_F32, kvTypeV: 'f32',
            contextShift: true, nKeep: 4 });
        try {
            assert.ok((await f32.complete(PROMPT, { maxTokens: 8 })).startsWith(STORY.slice(0, 20)));
        } finally {
            f32.free();
        }
        assert.throws(() => model.createSession({ kvTypeK: 'f8' }), TypeError);
    });

    test('truncate and tokens round trip', async () => {
        const s = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            assert.deepEqual(s.tokens(), []);
            const toks = model.tokenize(PROMPT);
            await s.prefill(toks);
            assert.deepEqual(s.tokens(), toks);
            s.truncate(2);
            assert.equal(s.nPast, 2);
            assert.deepEqual(s.tokens(), toks.slice(0, 2));
            assert.throws(() => s.truncate(3), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
            await s.prefill(toks.slice(2));
            assert.ok((await s.complete('', { maxTokens: 32 })).startsWith(STORY));
        } finally {
            s.free();
        }
    });

    test('save and load (file and Buffer) continue with the same tokens', async () => {
        const dir = fs.mkdtempSync(path.join(require('node:os').tmpdir(), 'llm-node-state-'));
        const a = model.createSession({ temperature: 0, nCtx: 128 });
        try {
            await a.complete(PROMPT, { maxTokens: 8 });
            const file = path.join(dir, 's.llmstate');
            await a.save(file);
            const blob = a.saveBuffer();
            assert.ok(blob.equals(fs.readFileSync(file)));
            const rest = await a.complete('', { maxTokens: 16 });
            for (const restore of [(s) => s.load(file), async (s) => s.loadBuffer(blob)]) {
                const b = model.createSession({ temperature: 0, nCtx: 128 });
                try {
                    await restore(b);
                    assert.equal(b.nPast, 5 + 8);
                    assert.equal(await b.complete('', { maxTokens: 16 }), rest);
                } finally {
                    b.free();
                }
            }
            const c = model.createSession({ temperature: 0, nCtx: 128 });
            try {
                assert.throws(() => c.loadBuffer(blob.subarray(0, blob.length >> 1)), (e) => e instanceof llm.LlmError);
                assert.equal(c.nPast, 0);
            } finally {
                c.free();
            }
        } finally {
            a.free();
            fs.rmSync(dir, { recursive: true, force: true });
        }
    });
});

// The README's two-turn chat on the ChatML copy of stories260K that run_tests.sh writes
// (bindings/chat_fixture.py, LLM_CHAT_MODEL): the model's template, parseSpecial, and only the new
// suffix evaluated on the second turn.
test('a two-turn chat on a ChatML model evaluates only the new suffix', {
    skip: !process.env.LLM_CHAT_MODEL && 'LLM_CHAT_MODEL (written by run_tests.sh) is not set',
}, async () => {
    const model = llm.loadModelSync(process.env.LLM_CHAT_MODEL);
    const s = model.createSession({ temperature: 0, nCtx: 512, parseSpecial: true });
    try {
        const [imStart, imEnd] = model.tokenize('<|im_start|><|im_end|>', { addBos: false, parseSpecial: true });
        assert.equal(model.eos, imEnd);
        assert.match(model.chatTemplate(), /<\|im_start\|>/);
        assert.ok(model.chatTemplate('tool_use').startsWith('{{ bos_token }}'));
        const chat = [['system', 'You tell stories.'], ['user', PROMPT]];
        const prompt1 = model.applyChatTemplate(chat);
        assert.equal(prompt1, `<|im_start|>system\nYou tell stories.<|im_end|>\n<|im_start|>user\n${PROMPT}<|im_end|>\n<|im_start|>assistant\n`);
        const reply1 = await s.complete(prompt1, { maxTokens: 16 });
        const want1 = model.tokenize(prompt1, { parseSpecial: true });
        assert.deepEqual(s.tokens().slice(0, want1.length), want1);
        assert.equal(want1.filter((t) => t === imStart).length, 3);
        chat.push(['assistant', reply1], ['user', 'Tell me more.']);
        const prompt2 = model.applyChatTemplate(chat);
        assert.ok(prompt2.startsWith(prompt1 + reply1));
        const suffix = prompt2.slice((prompt1 + reply1).length);
        const want2 = model.tokenize(suffix, { addBos: false, parseSpecial: true });
        assert.equal(want2[0], imEnd);
        const before = s.nPast;
        assert.ok((await s.complete(suffix, { maxTokens: 16 })).length > 0);
        // generate() prefills through llm_session_prefill: turn 2 evaluated only the suffix
        assert.equal(s.stats().total.prompt_tokens, want1.length + want2.length);
        assert.deepEqual(s.tokens().slice(before, before + want2.length), want2);
    } finally {
        s.free();
        model.free();
    }
});

// libllm 0.4: any error fails these tests (ERR_UNSUPPORTED too: the library implements 0.4).
describe('libllm 0.4: speculation, nextBatch, stats version 2', () => {
    let model;
    before(() => {
        model = llm.loadModelSync(MODEL);
    });
    after(() => model.free());

    const tokensOf = async (s, prompt, n) => {
        const out = [];
        for await (const step of s.generate(prompt, { maxTokens: n })) if (step.token >= 0) out.push(step.token);
        return out;
    };
    const solo = async (prompt, n) => {
        const s = model.createSession({ temperature: 0, nCtx: 256 });
        try {
            return await tokensOf(s, prompt, n);
        } finally {
            s.free();
        }
    };

    test('speculation with prompt lookup gives the plain greedy tokens', async () => {
        const want = await solo(PROMPT, 48);
        const s = model.createSession({ temperature: 0, nCtx: 256 });
        try {
            s.setSpeculation({ lookupNgram: 3 });
            assert.deepEqual(await tokensOf(s, PROMPT, 48), want);
            const { total } = s.stats();
            assert.ok(total.accepted_tokens <= total.drafted_tokens);
        } finally {
            s.free();
        }
    });

    test('speculation with a same-file draft gives the plain greedy tokens', async () => {
        const want = await solo(PROMPT, 32);
        const s = model.createSession({ temperature: 0, nCtx: 256 });
        const draft = llm.loadModelSync(MODEL);
        try {
            try {
                s.setSpeculation({ draft, nDraft: 4 });
            } finally {
                draft.free(); // the session keeps the library's own reference
            }
            assert.deepEqual(await tokensOf(s, PROMPT, 32), want);
            const { total } = s.stats();
            // the same weights draft what they verify: proposals are kept (not necessarily all)
            assert.ok(total.accepted_tokens > 0 && total.accepted_tokens <= total.drafted_tokens);
        } finally {
            s.free();
        }
    });

    test('bad speculation settings throw the library message', () => {
        const s = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            let err = null;
            try {
                s.setSpeculation({ lookupNgram: 2, nDraft: 0 });
            } catch (e) {
                err = e;
            }
            assert.ok(err instanceof llm.LlmError, String(err));
            assert.ok(err.detail.length > 0);
            assert.equal(err.detail, llm.lib().last_error());
            assert.equal(err.status, llm.ERR_INVALID_ARGUMENT);
            assert.match(err.detail, /n_draft/);
            assert.throws(() => s.setSpeculation({ noSuchOption: 1 }), TypeError);
        } finally {
            s.free();
        }
    });

    test('nextBatch of two sessions gives their solo tokens', async () => {
        const prompts = [PROMPT, 'Lily and Ben'];
        const want = [await solo(prompts[0], 16), await solo(prompts[1], 16)];
        const sessions = prompts.map(() => model.createSession({ temperature: 0, nCtx: 256 }));
        try {
            for (const [i, s] of sessions.entries()) await s.prefill(model.tokenize(prompts[i]));
            const got = [[], []];
            const done = [false, false];
            for (let step = 0; step < 16; step++) {
                const res = await llm.nextBatch(sessions);
                assert.equal(res.length, 2);
                res.forEach(({ token, status }, i) => {
                    if (done[i]) return;
                    if (status === llm.DONE) done[i] = true;
                    else {
                        assert.equal(status, llm.OK);
                        got[i].push(token);
                    }
                });
            }
            assert.deepEqual(got, want);
        } finally {
            sessions.forEach((s) => s.free());
        }
    });

    test('nextBatch rejects a whole-call error with the library message', async () => {
        const s = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            await s.prefill(model.tokenize(PROMPT));
            await assert.rejects(llm.nextBatch([]), (e) => e.status === llm.ERR_INVALID_ARGUMENT && /n is 0/.test(e.detail));
            await assert.rejects(llm.nextBatch([s, s]), (e) => e.status === llm.ERR_INVALID_ARGUMENT && /repeats/.test(e.detail));
            assert.equal(s.nPast, 5);
            // The message is read on the thread of the failed call, never by a second call here: this
            // thread's llm_last_error stays the earlier failure's.
            assert.throws(() => s.setSpeculation({ lookupNgram: 2, nDraft: 0 }), /n_draft/);
            const mine = llm.lib().last_error();
            await assert.rejects(llm.nextBatch([s, s]), (e) => /repeats/.test(e.detail));
            assert.equal(llm.lib().last_error(), mine);
            // A failure that a repeated call would not reproduce: a cancel pending from between calls
            // cancels the pass (and is used up by it), so only the failing call knows its message.
            s.cancel();
            await assert.rejects(llm.nextBatch([s]), (e) => e.status === llm.ERR_CANCELLED && /llm_session_cancel/.test(e.detail));
            assert.equal(s.nPast, 5);
            const [step] = await llm.nextBatch([s]);
            assert.equal(step.status, llm.OK);
            assert.equal(s.nPast, 6);
        } finally {
            s.free();
        }
    });

    test('nextBatch on a streamed model read through JS readAt gives the solo tokens', async () => {
        // The pass runs on nextBatch's own thread; each read_at still runs here on the JS thread.
        const data = fs.readFileSync(MODEL);
        let reads = 0;
        const io = llm.loadModelIo({
            size: data.length,
            readAt(offset, dst) {
                reads++;
                data.copy(dst, 0, offset, offset + dst.length);
            },
        }, { residency: llm.RESIDENCY_STREAMED });
        const prompts = [PROMPT, 'Lily and Ben'];
        const want = [await solo(prompts[0], 4), await solo(prompts[1], 4)];
        const sessions = prompts.map(() => io.createSession({ temperature: 0, nCtx: 64 }));
        try {
            for (const [i, s] of sessions.entries()) await s.prefill(io.tokenize(prompts[i]));
            const before = reads;
            const got = [[], []];
            for (let step = 0; step < 4; step++) {
                (await llm.nextBatch(sessions)).forEach(({ token, status }, i) => {
                    assert.equal(status, llm.OK);
                    got[i].push(token);
                });
            }
            assert.deepEqual(got, want);
            assert.ok(reads > before, 'the batched passes read the streamed weights through readAt');
        } finally {
            sessions.forEach((s) => s.free());
            io.free();
        }
    });

    test('two nextBatch calls over the same sessions in opposite orders both settle', { timeout: 60000 }, async () => {
        const a = model.createSession({ temperature: 0, nCtx: 64 });
        const b = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            await a.prefill(model.tokenize(PROMPT));
            await b.prefill(model.tokenize(PROMPT));
            const r = await Promise.allSettled([llm.nextBatch([a, b]), llm.nextBatch([b, a])]);
            for (const x of r) assert.equal(x.status, 'fulfilled', String(x.reason));
            assert.equal(a.nPast, 5 + 2);
            assert.equal(b.nPast, 5 + 2);
        } finally {
            a.free();
            b.free();
        }
    });

    test('stats has the version 2 counters', async () => {
        const s = model.createSession({ temperature: 0, nCtx: 64 });
        try {
            await s.complete(PROMPT, { maxTokens: 8 });
            const { total, lastCall } = s.stats();
            for (const k of ['passes', 'drafted_tokens', 'accepted_tokens']) {
                assert.equal(typeof total[k], 'number', k);
                assert.equal(typeof lastCall[k], 'number', k);
            }
            assert.ok(total.passes >= 1 + 7, `passes ${total.passes}`); // the prompt's chunk, one per accept
            assert.equal(total.drafted_tokens, 0);
            assert.equal(total.generated_tokens, 8);
        } finally {
            s.free();
        }
    });
});

describe('embed (libllm 0.4)', () => {
    const EMBED = path.join(SHARED, 'embeddings');
    const QWEN3 = path.join(SHARED, 'fixtures', 'models', 'qwen3.f32.gguf');
    const have = fs.existsSync(QWEN3) && !!llm.lib().session_embed;
    let model;
    let s;
    before(() => {
        if (!have) return;
        model = llm.loadModelSync(QWEN3);
        s = new llm.Session(model, { nCtx: 256, kvTypeK: 'f32', kvTypeV: 'f32' });
    });
    after(() => {
        if (s) s.free();
        if (model) model.free();
    });
    test('mean vectors match llama.cpp raw and normalised; batched equals alone', { skip: !have }, () => {
        const g = JSON.parse(fs.readFileSync(path.join(EMBED, 'qwen3.f32.mean.json'), 'utf8'));
        const raw = new Float32Array(fs.readFileSync(path.join(EMBED, g.files.raw)).buffer.slice(0));
        const texts = g.prompts.map((p) => p.text);
        const vecs = s.embed(texts, 'mean');
        assert.equal(vecs.length, 4);
        vecs.forEach((v, i) => {
            assert.ok(v instanceof Float32Array);
            assert.equal(v.length, 256);
            let worst = 0;
            for (let e = 0; e < 256; e++) worst = Math.max(worst, Math.abs(v[e] - raw[i * 256 + e]));
            assert.ok(worst <= 1e-4, `max diff ${worst}`);
        });
        const unit = s.embed(texts, llm.POOLING_MEAN, true);
        unit.forEach((v, i) => {
            let dot = 0;
            let rr = 0;
            for (let e = 0; e < 256; e++) {
                dot += v[e] * raw[i * 256 + e];
                rr += raw[i * 256 + e] * raw[i * 256 + e];
            }
            assert.ok(dot / Math.sqrt(rr) >= 0.99999);
            assert.deepEqual(s.embed([texts[i]], 'mean', true)[0], v);
        });
    });
    test('default pooling (none) and errors', { skip: !have }, () => {
        const [rows] = s.embed('Hello world');
        assert.equal(rows.length % 256, 0);
        assert.ok(rows.length > 256);
        assert.throws(() => s.embed(['ok', ''], 'mean'), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        assert.throws(() => s.embed(['ok'], 'rank'), (e) => e.status === llm.ERR_UNSUPPORTED);
        assert.throws(() => s.embed(['ok'], 'median'), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        assert.throws(() => s.embed([]), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
    });
});

describe('structured output (libllm 0.4): JSON schema, grammar, stop strings, logprobs, bias', () => {
    let model;
    before(() => {
        model = llm.loadModelSync(MODEL);
    });
    after(() => model.free());
    // A bounded object: every draw must close it within a few dozen tokens; then only the end remains.
    const PERSON = {
        type: 'object',
        properties: { name: { type: 'string', maxLength: 8 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
        required: ['name', 'age'],
        additionalProperties: false,
    };
    // JSON Schema's integer is any number without a fraction (12.0 is one).
    const fitsPerson = (v) => v && typeof v === 'object' && Object.keys(v).sort().join() === 'age,name' &&
        typeof v.name === 'string' && [...v.name].length <= 8 && Number.isInteger(v.age) && v.age >= 0 && v.age <= 120;

    test('JSON schema generation parses and fits the schema', async () => {
        for (let seed = 0; seed < 5; seed++) {
            const s = model.createSession({ temperature: 1, seed });
            try {
                s.setJsonSchema(PERSON);
                const text = await s.complete(PROMPT, { maxTokens: 200 });
                assert.equal(s.lastStatus, llm.DONE, text);
                assert.ok(fitsPerson(JSON.parse(text)), text);
            } finally {
                s.free();
            }
        }
        const s = model.createSession();
        assert.throws(() => s.setJsonSchema({ type: 'object', not: {} }), (e) => e.status === llm.ERR_UNSUPPORTED);
        s.setJsonSchema(null);
        s.free();
    });

    test('a GBNF grammar through the pull steps; a bad one says where', async () => {
        const s = model.createSession({ temperature: 1, seed: 3 });
        s.setGrammar('root ::= "Lily" (" was" | " ran"){1,3} "."\n');
        const text = await s.complete(PROMPT, { maxTokens: 50 });
        assert.match(text, /^Lily( was| ran){1,3}\.$/);
        assert.equal(s.lastStatus, llm.DONE);
        assert.throws(() => s.setGrammar('root ::= [a-\n'),
            (e) => e.status === llm.ERR_INVALID_ARGUMENT && /line 2, column 1/.test(e.detail));
        s.setGrammar(null);
        s.free();
    });

    test('stop strings end generation before the stop text', async () => {
        const plain = model.createSession({ temperature: 0 });
        const full = await plain.complete(PROMPT, { maxTokens: 40 });
        plain.free();
        const cut = full.slice(0, full.indexOf(' Lily'));
        const s = model.createSession({ temperature: 0 });
        s.setStop([' Lily', 'never there']);
        assert.equal(await s.complete(PROMPT, { maxTokens: 40 }), cut);
        assert.equal(s.lastStatus, llm.STOPPED);
        assert.throws(() => s.setStop(['']), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        s.setStop([]);
        s.free();
    });

    // The first generated token; the generator is closed, so the session is free again.
    const firstToken = async (s) => {
        const it = s.generate(PROMPT, { maxTokens: 1 });
        const { value } = await it.next();
        await it.return();
        return value.token;
    };

    test('logprobs, logit bias and penalties', async () => {
        const s = model.createSession({ temperature: 0 });
        s.setLogprobs(3);
        const first = await firstToken(s);
        const lp = s.logprobs();
        assert.equal(lp.token, first);
        assert.equal(lp.top.length, 3);
        assert.equal(lp.top[0].token, first);
        assert.ok(lp.logprob < 0);
        s.setLogprobs(null);
        assert.throws(() => s.logprobs(), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        assert.throws(() => s.setLogitBias({ [model.nVocab]: 1 }), (e) => e.status === llm.ERR_INVALID_ARGUMENT);
        s.free();
        const banned = model.createSession({ temperature: 0 });
        banned.setLogitBias(new Map([[first, -Infinity]]));
        assert.notEqual(await firstToken(banned), first);
        banned.free();
        const run = async (opts) => {
            const x = model.createSession({ temperature: 0, ...opts });
            try {
                return await x.complete(PROMPT, { maxTokens: 60 });
            } finally {
                x.free();
            }
        };
        assert.notEqual(await run({}), await run({ presencePenalty: 2, frequencyPenalty: 1 }));
    });
});
