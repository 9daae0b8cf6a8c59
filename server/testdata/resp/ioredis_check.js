// Checks serve's RESP front with ioredis (server/resp_test.go runs it).
// Environment as redis_py_check.py's. Prints "ok" and exits 0, or says
// what differs and exits 1.
'use strict';
const fs = require('fs');
const Redis = require('ioredis');

const host = process.env.RESP_HOST, port = Number(process.env.RESP_PORT);
const key = process.env.KEY;
const want = JSON.parse(fs.readFileSync(process.env.WANT)).map(e => ({
  id: e.id, fields: e.fields.map(([n, v]) => [Buffer.from(n, 'hex'), Buffer.from(v, 'hex')]),
}));

function fail(msg) { console.log('FAIL: ' + msg); process.exit(1); }

function same(got, exp, what) {
  if (got.length !== exp.length) fail(`${what}: ${got.length} entries, want ${exp.length}`);
  got.forEach(([id, kv], i) => {
    const e = exp[i];
    if (id.toString() !== e.id) fail(`${what}: entry ${i} id ${id}, want ${e.id}`);
    if (kv.length !== 2 * e.fields.length) fail(`${what}: entry ${i} has ${kv.length / 2} fields`);
    e.fields.forEach(([n, v], j) => {
      if (!kv[2 * j].equals(n) || !kv[2 * j + 1].equals(v)) fail(`${what}: entry ${i} field ${j} differs`);
    });
  });
}

async function main() {
  const opts = { host, port, maxRetriesPerRequest: 1, retryStrategy: () => null, lazyConnect: true };
  const reader = new Redis({ ...opts, password: process.env.READ_TOKEN });
  const writer = new Redis({ ...opts, password: process.env.WRITE_TOKEN });
  await reader.connect();
  await writer.connect();

  same(await reader.xrangeBuffer(key, '-', '+'), want, 'XRANGE - +');
  same(await reader.xrevrangeBuffer(key, '+', '-', 'COUNT', 5), want.slice().reverse().slice(0, 5), 'XREVRANGE COUNT 5');
  const xr = await reader.xreadBuffer('STREAMS', key, '0');
  if (xr.length !== 1 || xr[0][0].toString() !== key) fail('XREAD STREAMS key 0: ' + xr.length + ' keys');
  same(xr[0][1], want, 'XREAD from 0');
  const xr7 = await reader.xreadBuffer('COUNT', 7, 'STREAMS', key, want[50].id);
  same(xr7[0][1], want.slice(51, 58), 'XREAD COUNT 7 from an id deep in history');
  if (await reader.xlen(key) !== want.length) fail('XLEN');

  await writer.set('js:bin', Buffer.from([0, 255, 13, 10, 1]));
  if (!(await reader.getBuffer('js:bin')).equals(Buffer.from([0, 255, 13, 10, 1]))) fail('GET of a binary value');
  const tx = await writer.multi().set('js:n', 1).incr('js:n').get('js:n').exec();
  if (JSON.stringify(tx) !== JSON.stringify([[null, 'OK'], [null, 2], [null, '2']])) fail('MULTI/EXEC: ' + JSON.stringify(tx));

  const sub = new Redis({ ...opts, password: process.env.READ_TOKEN });
  await sub.connect();
  const got = new Promise((resolve, reject) => {
    sub.on('messageBuffer', (ch, msg) => resolve([ch.toString(), msg]));
    setTimeout(() => reject(new Error('no message in 10s')), 10000).unref();
  });
  await sub.subscribe('js:ch');
  await writer.publish('js:ch', Buffer.from('hello \u0000'));
  const [ch, msg] = await got;
  if (ch !== 'js:ch' || !msg.equals(Buffer.from('hello \u0000'))) fail('SUBSCRIBE message');
  await sub.unsubscribe('js:ch');
  if (await sub.xlen(key) !== want.length) fail('XLEN after UNSUBSCRIBE');
  sub.disconnect();

  try {
    await reader.set('js:x', '1');
    fail('SET with the read token succeeded');
  } catch (e) {
    if (!String(e.message).includes('NOPERM')) fail('SET with the read token: ' + e.message);
  }
  const wrong = new Redis({ ...opts, password: 'wrong-token-wrong-token' });
  let authErr = '';
  wrong.on('error', e => { authErr += String(e.message); });
  try {
    await wrong.connect();
    await wrong.ping();
    fail('PING with a wrong token succeeded');
  } catch (e) {
    if (!(String(e.message) + authErr).includes('WRONGPASS')) fail('wrong token: ' + e.message + ' ' + authErr);
  }
  wrong.disconnect();
  reader.disconnect();
  writer.disconnect();
  console.log('ok');
}

main().catch(e => fail(e.stack || String(e)));
