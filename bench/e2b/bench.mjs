// Times the e2b SDK against a Sandbox4j server (E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL):
// ITERATIONS rounds of Sandbox.create + commands.run('true') (+ kill, not timed), then
// ITERATIONS rounds of commands.run('true') in one sandbox. Prints {"create_run": [ns...],
// "run": [ns...]} after WARMUP untimed rounds of each.
import { Sandbox } from 'e2b'

const n = Number(process.env.ITERATIONS ?? 50)
const warmup = Number(process.env.WARMUP ?? 5)
const now = () => process.hrtime.bigint()
const createRun = []
for (let i = 0; i < warmup + n; i++) {
  const t0 = now()
  const sbx = await Sandbox.create('base', { metadata: { bench: 'e2b' } })
  await sbx.commands.run('true')
  const t1 = now()
  await sbx.kill()
  if (i >= warmup) createRun.push(Number(t1 - t0))
}
const sbx = await Sandbox.create('base', { metadata: { bench: 'e2b' } })
const run = []
for (let i = 0; i < warmup + n; i++) {
  const t0 = now()
  await sbx.commands.run('true')
  const t1 = now()
  if (i >= warmup) run.push(Number(t1 - t0))
}
await sbx.kill()
console.log(JSON.stringify({ create_run: createRun, run }))
