// A Node producer that honours flow-sidecar's flow control: it sends only while its queue is
// not flow stopped, told by one long poll at a time, and publishes with confirms, at most
// CAPACITY messages unconfirmed. Usage: node producer.js [QUEUE] [COUNT]
'use strict';
const amqp = require('amqplib');

const SIDECAR = process.env.FLOW_SIDECAR_URL || 'http://127.0.0.1:8080';
const BROKER = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
const CAPACITY = 50;
const HEADERS = { 'X-Producer-Id': `node-${process.pid}`, 'X-Producer-Capacity': `${CAPACITY}` };

// The queue's flow state, kept fresh by a long poll: `since` the last answer's version, the
// sidecar answers at the next change, or after `wait` seconds with the same state.
class FlowWatch {
  constructor(queue) {
    this.url = `${SIDECAR}/flow/%2F/${encodeURIComponent(queue)}`;
    this.aborted = new AbortController();
    this.wakeUps = [];
  }

  async ask(query = '') {
    const answer = await fetch(this.url + query, { headers: HEADERS, signal: this.aborted.signal });
    if (!answer.ok) throw new Error(`GET ${this.url}: ${answer.status} ${await answer.text()}`);
    this.state = await answer.json();
    if (!this.state.flowStopped) this.wakeUps.splice(0).forEach((wake) => wake());
  }

  async start() {
    await this.ask();
    this.polling = (async () => {
      while (!this.aborted.signal.aborted) await this.ask(`?since=${this.state.version}&wait=30`);
    })().catch((err) => { if (!this.aborted.signal.aborted) throw err; });
  }

  flowing() { // resolves at once while the queue flows, else once it does
    if (!this.state.flowStopped) return Promise.resolve();
    console.log(`${this.state.queue} is flow stopped at ${this.state.depth.messages} messages: waiting`);
    return new Promise((wake) => this.wakeUps.push(wake));
  }

  async close() { // stop polling, and tell the sidecar this producer is gone
    this.aborted.abort();
    await this.polling;
    await fetch(`${SIDECAR}/producers/${HEADERS['X-Producer-Id']}`, { method: 'DELETE' });
  }
}

async function main() {
  const [queue = 'orders', count = '100'] = process.argv.slice(2);
  const connection = await amqp.connect(BROKER);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true });
  const watch = new FlowWatch(queue);
  await watch.start();
  try {
    for (let n = 1; n <= Number(count); n++) {
      await watch.flowing();
      channel.sendToQueue(queue, Buffer.from(`order ${n}`), { persistent: true });
      if (n % CAPACITY === 0) await channel.waitForConfirms(); // a full window: wait for it
      console.log(`sent ${n}`);
    }
    await channel.waitForConfirms(); // every message confirmed by the broker
  } finally {
    await watch.close();
    await connection.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
