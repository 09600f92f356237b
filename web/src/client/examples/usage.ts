// A typed use of the client: compiled with `tsc --strict` by the tests, so the
// declarations in types/ stay usable from TypeScript.
import {
  Client, Code, LimitError, RpcError,
  type PlannerOutput, type StreamEvent, type SubscribeOptions,
} from '@ballet/realtime-client';

export async function board(url: string, token: () => Promise<string>, project: string): Promise<Client> {
  const client = new Client(url, { token, codec: 'msgpack' });
  await client.connect({ retry: true });

  const seen = new Map<string, number>();
  const opts: SubscribeOptions = {
    types: ['item.*', 'dependency.added'],
    onEvent: (ev: StreamEvent) => { seen.set(ev.entity_id, ev.seq); },
    onResync: (seq: number) => { console.log(`reload the snapshot; events after ${seq} follow`); },
    onPresence: (present: string[]) => { console.log(`on the board: ${present.join(', ')}`); },
    onItemPresence: (items: Map<string, string[]>) => {
      for (const [key, who] of items) console.log(`${key} is open for ${who.join(', ')}`);
    },
  };
  const sub = await client.subscribe(`project:${project}`, opts);
  console.log(`subscribed at seq ${sub.seq}`);

  try {
    const members = await client.presenceGet(`project:${project}`);
    for (const m of members.members) console.log(m.subject, m.connections);
    const withItems = await client.presenceGetItems(`project:${project}`);
    for (const it of withItems.items) console.log(it.stream, it.members.length, withItems.items_truncated);
  } catch (err) {
    if (err instanceof LimitError) console.log(`slow down: ${err.retryAfterMs ?? 0} ms`);
    else if (err instanceof RpcError && err.code === Code.Forbidden) console.log('not a reader');
    else throw err;
  }
  return client;
}

export function render(out: PlannerOutput): string {
  return `${out.turn ?? ''}#${out.offset ?? 0} ${out.type}: ${out.text ?? ''}`;
}
