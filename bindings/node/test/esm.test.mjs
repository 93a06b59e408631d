// The ESM entry point (index.mjs): default and named exports are the CommonJS module's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import llm, { version, Model, loadModel } from '../index.mjs';

const cjs = createRequire(import.meta.url)('../index.js');

test('index.mjs re-exports index.js', () => {
    assert.equal(llm, cjs);
    assert.equal(Model, cjs.Model);
    assert.equal(loadModel, cjs.loadModel);
    assert.equal(version(), cjs.version());
});
