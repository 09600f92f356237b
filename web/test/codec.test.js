import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Backoff, codecFor, json, msgpack, refreshDelay } from '../src/client/index.js';

/** @param {string} h */
const hex = (h) => Uint8Array.from(h.match(/../g) ?? [], (b) => parseInt(b, 16));
/** @param {Uint8Array} b */
const toHex = (b) => Buffer.from(b).toString('hex');

// Frames from docs/protocol.md, as the Go server encodes them.
const authRequest = '84a76a736f6e727063a3322e30a2696401a66d6574686f64a461757468a6706172616d7381a5746f6b656ead65794a68624763694f692e2e2e';
const subscribeRequest = '84a76a736f6e727063a3322e30a2696403a66d6574686f64b073747265616d2e737562736372696265a6706172616d7383ac737562736372697074696f6ea27331a673747265616dab70726f6a6563743a574542a866726f6d5f736571cd03e8';
const streamEvent = '83a76a736f6e727063a3322e30a66d6574686f64ac73747265616d2e6576656e74a6706172616d7389ac737562736372697074696f6ea27331a3736571cd0412a474797065b26974656d2e73746174655f6368616e676564ab656e746974795f74797065a46974656da9656e746974795f6964d92430313939613162322d376333642d376534662d386135622d366337643865396661306231aa656e746974795f6b6579a65745422d3432ab6f636375727265645f6174cf000001a0f5c93780a56163746f7282a46b696e64a568756d616ea77375626a656374a438373531a77061796c6f616482a466726f6da76261636b6c6f67a2746fa57265616479';
const resyncError = '83a76a736f6e727063a3322e30a2696404a56572726f7282a4636f6465d182f6a76d657373616765d94f726573796e632072657175697265643a207375627363726962652070726f6a6563743a5745423a206d6f7265207468616e2031303030206576656e74732061667465722066726f6d5f736571203132';

describe('msgpack codec', () => {
  it('encodes requests exactly as the protocol page shows them', () => {
    assert.equal(toHex(/** @type {Uint8Array} */ (msgpack.encode({ jsonrpc: '2.0', id: 1, method: 'auth', params: { token: 'eyJhbGciOi...' } }))), authRequest);
    const sub = { jsonrpc: '2.0', id: 3, method: 'stream.subscribe', params: { subscription: 's1', stream: 'project:WEB', from_seq: 1000 } };
    assert.equal(toHex(/** @type {Uint8Array} */ (msgpack.encode(sub))), subscribeRequest);
  });

  it('leaves undefined fields out', () => {
    const a = msgpack.encode({ jsonrpc: '2.0', id: 3, method: 'stream.subscribe', params: { subscription: 's1', stream: 'project:WEB', from_seq: undefined } });
    assert.deepEqual(msgpack.decode(/** @type {Uint8Array} */ (a)).params, { subscription: 's1', stream: 'project:WEB' });
  });

  it('decodes the server frames of the protocol page', () => {
    const ev = msgpack.decode(hex(streamEvent).buffer);
    assert.deepEqual(ev, {
      jsonrpc: '2.0', method: 'stream.event', params: {
        subscription: 's1', seq: 1042, type: 'item.state_changed', entity_type: 'item',
        entity_id: '0199a1b2-7c3d-7e4f-8a5b-6c7d8e9fa0b1', entity_key: 'WEB-42', occurred_at: 1790830000000,
        actor: { kind: 'human', subject: '8751' }, payload: { from: 'backlog', to: 'ready' },
      },
    });
    const err = msgpack.decode(hex(resyncError));
    assert.equal(err.error.code, -32010);
  });

  it('refuses text frames and garbage', () => {
    assert.throws(() => msgpack.decode('{}'));
    assert.throws(() => msgpack.decode(hex('c1')));
  });
});

describe('json codec', () => {
  it('round-trips text frames', () => {
    const msg = { jsonrpc: '2.0', id: 9, method: 'auth.refresh', params: { token: 't' } };
    const frame = json.encode(msg);
    assert.equal(typeof frame, 'string');
    assert.deepEqual(json.decode(frame), msg);
    assert.deepEqual(json.decode(new TextEncoder().encode(String(frame))), msg);
    assert.throws(() => json.decode('{"jsonrpc":'));
  });

  it('is chosen by name', () => {
    assert.equal(codecFor(undefined), msgpack);
    assert.equal(codecFor('json'), json);
    assert.equal(codecFor('ballet.v1.msgpack'), msgpack);
    assert.throws(() => codecFor('xml'));
  });
});

describe('backoff', () => {
  it('doubles the ceiling up to the maximum, with full jitter', () => {
    const top = new Backoff(100, 1000, () => 0.9999999);
    assert.deepEqual([1, 2, 3, 4, 5, 6].map(() => top.next()), [100, 200, 400, 800, 1000, 1000]);
    const bottom = new Backoff(100, 1000, () => 0);
    assert.deepEqual([1, 2, 3].map(() => bottom.next()), [0, 0, 0]);
    top.reset();
    assert.equal(top.next(), 100);
    const many = new Backoff(250, 30000);
    for (let i = 0; i < 100; i++) {
      const d = many.next();
      assert.ok(d >= 0 && d <= 30000, String(d));
    }
  });
});

describe('refreshDelay', () => {
  it('waits until 80 % of the token lifetime, at least a second', () => {
    assert.equal(refreshDelay(0, 100000, 0), 80000);
    assert.equal(refreshDelay(0, 100000, 50000), 30000);
    assert.equal(refreshDelay(0, 100000, 99000), 1000);
    assert.equal(refreshDelay(0, 1e13, 0), 2 ** 31 - 1);
  });
});
