// Drives the e2b SDK (pinned in package-lock.json) against a Sandbox4j server; prints one JSON
// object of what each step saw. Env: E2B_API_KEY, E2B_API_URL, E2B_SANDBOX_URL (read by the SDK),
// OTHER_KEY (a key of another organization).
import { Sandbox, CommandExitError, NotFoundError, AuthenticationError, TimeoutError, SandboxError, RateLimitError } from 'e2b'

const out = {}
const step = async (name, fn) => {
  try {
    out[name] = await fn()
  } catch (e) {
    out[name] = { threw: e?.constructor?.name, message: String(e?.message ?? e) }
  }
}
const err = (e) => ({ threw: e?.constructor?.name, message: String(e?.message ?? e) })

const tag = `run-${process.pid}`
let sbx
await step('create', async () => {
  sbx = await Sandbox.create('base', { metadata: { suite: tag, role: 'main' }, envs: { GLOBAL_VAR: 'from-create' }, timeoutMs: 120_000 })
  return { id: sbx.sandboxId }
})
// a sandbox whose E2B timeout runs out while the steps below run (they take longer than 3 s)
let shortLived
await step('createShortLived', async () => {
  shortLived = await Sandbox.create('base', { timeoutMs: 3_000, metadata: { suite: tag, role: 'short' } })
  return { id: shortLived.sandboxId, endsInMs: (await shortLived.getInfo()).endAt.getTime() - Date.now() }
})
if (!sbx) {
  console.log(JSON.stringify(out))
  process.exit(0)
}
await step('runForeground', async () => {
  const r = await sbx.commands.run('echo hello; echo oops >&2; echo $GLOBAL_VAR')
  return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }
})
await step('runEnvCwd', async () => {
  const r = await sbx.commands.run('echo $MY_VAR; pwd', { envs: { MY_VAR: 'v1' }, cwd: '/tmp' })
  return { stdout: r.stdout }
})
await step('runNonZero', async () => {
  try {
    await sbx.commands.run('echo bad >&2; exit 3')
    return { threw: null }
  } catch (e) {
    return { threw: e.constructor.name, isCommandExitError: e instanceof CommandExitError, exitCode: e.exitCode, stderr: e.stderr }
  }
})
await step('runTimeout', async () => {
  const t0 = Date.now()
  try {
    await sbx.commands.run('sleep 30', { timeoutMs: 1500 })
    return { threw: null }
  } catch (e) {
    return { threw: e.constructor.name, isTimeout: e instanceof TimeoutError, ms: Date.now() - t0 }
  }
})
await step('stdin', async () => {
  const h = await sbx.commands.run('cat', { background: true, stdin: true })
  await h.sendStdin('piped line\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  return { stdout: r.stdout, exitCode: r.exitCode }
})
await step('background', async () => {
  const chunks = []
  const h = await sbx.commands.run('echo started; sleep 60', { background: true, onStdout: (d) => chunks.push(d) })
  const t0 = Date.now()
  while (!chunks.join('').includes('started') && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50))
  const listed = (await sbx.commands.list()).map((p) => p.pid)
  const killed = await h.kill()
  let waited
  try {
    waited = await h.wait()
  } catch (e) {
    waited = { threw: e.constructor.name, exitCode: e.exitCode }
  }
  const after = (await sbx.commands.list()).map((p) => p.pid)
  return { pid: h.pid, listedHasPid: listed.includes(h.pid), killed, waited, stdout: chunks.join(''), listedAfter: after.includes(h.pid) }
})
await step('backgroundWait', async () => {
  const h = await sbx.commands.run('sleep 0.3; echo done', { background: true })
  const r = await h.wait()
  return { stdout: r.stdout, exitCode: r.exitCode }
})
await step('files', async () => {
  const w = await sbx.files.write('/tmp/e2b-test/a.txt', 'content one')
  const read = await sbx.files.read('/tmp/e2b-test/a.txt')
  const bytes = await sbx.files.read('/tmp/e2b-test/a.txt', { format: 'bytes' })
  const madeDir = await sbx.files.makeDir('/tmp/e2b-test/sub')
  const madeAgain = await sbx.files.makeDir('/tmp/e2b-test/sub')
  const list = (await sbx.files.list('/tmp/e2b-test')).map((e) => ({ name: e.name, type: e.type, path: e.path }))
  const info = await sbx.files.getInfo('/tmp/e2b-test/a.txt')
  const renamed = await sbx.files.rename('/tmp/e2b-test/a.txt', '/tmp/e2b-test/sub/b.txt')
  const existsOld = await sbx.files.exists('/tmp/e2b-test/a.txt')
  const existsNew = await sbx.files.exists('/tmp/e2b-test/sub/b.txt')
  const viaShell = (await sbx.commands.run('cat /tmp/e2b-test/sub/b.txt')).stdout
  await sbx.files.remove('/tmp/e2b-test/sub')
  const existsAfterRemove = await sbx.files.exists('/tmp/e2b-test/sub/b.txt')
  let missing
  try {
    await sbx.files.read('/tmp/e2b-test/nope.txt')
  } catch (e) {
    missing = e.constructor.name
  }
  const multi = await sbx.files.write([{ path: '/tmp/e2b-test/m1.txt', data: 'one' }, { path: '/tmp/e2b-test/m2.txt', data: 'two' }])
  const home = await sbx.files.write('/home/user/home.txt', 'at home')
  const homeRead = (await sbx.commands.run('cat ~/home.txt; cat /home/user/home.txt')).stdout
  return {
    written: { name: w.name, path: w.path, type: w.type }, read, bytesLength: bytes.length, madeDir, madeAgain, list,
    info: { name: info.name, type: info.type, size: info.size, permissions: info.permissions, hasModified: info.modifiedTime instanceof Date },
    renamed: { name: renamed.name, path: renamed.path }, existsOld, existsNew, viaShell, existsAfterRemove, missing,
    multi: multi.map((m) => m.path), home: home.path, homeRead,
  }
})
await step('signedUrls', async () => {
  const down = await sbx.downloadUrl('/tmp/e2b-test/m1.txt')
  const downloaded = await fetch(down)
  const up = await sbx.uploadUrl('/tmp/e2b-test/uploaded.txt')
  const form = new FormData()
  form.append('file', new Blob(['sent by url']), 'uploaded.txt')
  const uploaded = await fetch(up, { method: 'POST', body: form })
  const tampered = await fetch(down.replace('m1.txt', 'm2.txt'))
  return {
    hasSandboxId: down.includes(sbx.sandboxId), downStatus: downloaded.status, downText: await downloaded.text(),
    upStatus: uploaded.status, readBack: await sbx.files.read('/tmp/e2b-test/uploaded.txt'), tampered: tampered.status,
  }
})
await step('watchDir', async () => {
  await sbx.files.makeDir('/tmp/watched')
  const events = []
  const handle = await sbx.files.watchDir('/tmp/watched', (e) => events.push({ name: e.name, type: e.type }))
  await sbx.files.write('/tmp/watched/new.txt', 'x')
  const t0 = Date.now()
  while (!events.some((e) => e.name === 'new.txt') && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 100))
  await handle.stop()
  return { events }
})
await step('commandsConnect', async () => {
  const h = await sbx.commands.run('sleep 1; echo later', { background: true })
  await h.disconnect()
  const again = await sbx.commands.connect(h.pid)
  const r = await again.wait()
  return { stdout: r.stdout, samePid: again.pid === h.pid }
})
await step('envdRaw', async () => {
  // what the SDK never sends: a forged token, and Connect's binary codec
  const url = process.env.E2B_SANDBOX_URL + '/filesystem.Filesystem/Stat'
  const forged = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': '1.forged' },
    body: JSON.stringify({ path: '/tmp' }),
  })
  const envd = { 'E2b-Sandbox-Id': sbx.sandboxId, 'X-Access-Token': sbx.envdAccessToken, 'Connect-Protocol-Version': '1' }
  // Connect's binary codec, encoded by hand from the .proto field numbers: StatRequest{path: "/tmp"}
  const binary = await fetch(url, {
    method: 'POST',
    headers: { ...envd, 'Content-Type': 'application/proto' },
    body: new Uint8Array([10, 4, ...Buffer.from('/tmp')]),
  })
  const binaryBody = Buffer.from(await binary.arrayBuffer())
  // StartRequest{process: ProcessConfig{cmd: "/bin/echo", args: ["hi"]}} in one envelope
  const config = Buffer.from([10, 9, ...Buffer.from('/bin/echo'), 18, 2, ...Buffer.from('hi')])
  const start = Buffer.from([10, config.length, ...config])
  const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, start.length]), start])
  const streamed = await fetch(process.env.E2B_SANDBOX_URL + '/process.Process/Start', {
    method: 'POST',
    headers: { ...envd, 'Content-Type': 'application/connect+proto' },
    body: envelope,
  })
  const raw = Buffer.from(await streamed.arrayBuffer())
  const frames = []
  for (let at = 0; at + 5 <= raw.length; ) {
    const len = raw.readUInt32BE(at + 1)
    frames.push({ flags: raw[at], payload: raw.subarray(at + 5, at + 5 + len) })
    at += 5 + len
  }
  const health = await fetch(process.env.E2B_SANDBOX_URL + '/health', { headers: { 'E2b-Sandbox-Id': sbx.sandboxId } })
  return {
    forged: forged.status, forgedBody: await forged.json(),
    binary: binary.status, binaryType: binary.headers.get('content-type'), binaryHasPath: binaryBody.includes(Buffer.from('/tmp')),
    streamedType: streamed.headers.get('content-type'), frames: frames.length,
    stdoutSeen: frames.some((f) => f.flags === 0 && f.payload.includes(Buffer.from('hi\n'))),
    trailer: frames.length ? { flags: frames[frames.length - 1].flags, text: frames[frames.length - 1].payload.toString() } : null,
    health: health.status,
  }
})
await step('user', async () => {
  const u = await sbx.commands.run('id -un; echo $HOME')
  const r = await sbx.commands.run('id -u', { user: 'root' })
  return { user: u.stdout, rootUid: r.stdout.trim() }
})
await step('getHost', async () => {
  // a server inside the sandbox, reached at the host the SDK makes: <port>-<id>.<domain>, the
  // domain being the engine's port proxy on loopback (localhost:PORT); *.localhost is sent to
  // 127.0.0.1 here because the resolver of a test machine need not know it
  await sbx.files.write('/tmp/www/index.html', 'served from the sandbox')
  await sbx.commands.run('cd /tmp/www && exec python3 -m http.server 8123 >/dev/null 2>&1', { background: true })
  const host = sbx.getHost(8123)
  const [name, port] = host.split(':')
  const http = await import('node:http')
  const get = () => new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: Number(port), path: '/index.html', headers: { Host: host } }, (res) => {
      let body = ''
      res.on('data', (d) => (body += d))
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
  let answer
  const t0 = Date.now()
  do {
    answer = await get().catch((e) => ({ status: 0, body: String(e) }))
    if (answer.status === 200) break
    await new Promise((r) => setTimeout(r, 200))
  } while (Date.now() - t0 < 10000)
  return { host, name, status: answer.status, body: answer.body }
})
await step('setTimeout', async () => {
  const before = (await sbx.getInfo()).endAt.getTime()
  await sbx.setTimeout(600_000)
  const after = (await sbx.getInfo()).endAt.getTime()
  return { extendedBySeconds: Math.round((after - before) / 1000) }
})
await step('info', async () => {
  const i = await sbx.getInfo()
  return { sandboxId: i.sandboxId, templateId: i.templateId, metadata: i.metadata, state: i.state, running: await sbx.isRunning() }
})
await step('list', async () => {
  const p = Sandbox.list({ query: { metadata: { suite: tag } } })
  const items = await p.nextItems()
  const none = await Sandbox.list({ query: { metadata: { suite: 'no-such-suite' } } }).nextItems()
  return { ids: items.map((s) => s.sandboxId), metadata: items.map((s) => s.metadata), none: none.length }
})
await step('connect', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  const r = await again.commands.run('echo connected')
  return { stdout: r.stdout }
})
await step('pauseResume', async () => {
  await sbx.commands.run('echo kept > /tmp/kept.txt')
  const paused = await sbx.pause()
  const pausedAgain = await Sandbox.pause(sbx.sandboxId)
  const state = (await sbx.getInfo()).state
  const running = await sbx.isRunning()
  const listedPaused = (await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()).length
  const resumed = await Sandbox.connect(sbx.sandboxId)
  const r = await resumed.commands.run('cat /tmp/kept.txt')
  return { paused, pausedAgain, state, running, listedPaused, stateAfter: (await resumed.getInfo()).state, kept: r.stdout }
})
await step('wrongKey', async () => {
  try {
    await Sandbox.list({ apiKey: 'sk4j_wrong_key_0000000000000000' }).nextItems()
    return { threw: null }
  } catch (e) {
    return { threw: e.constructor.name, isAuth: e instanceof AuthenticationError }
  }
})
await step('otherOrg', async () => {
  const r = {}
  try {
    await Sandbox.connect(sbx.sandboxId, { apiKey: process.env.OTHER_KEY })
    r.connect = null
  } catch (e) {
    r.connect = e.constructor.name
    r.connectIsNotFound = e instanceof NotFoundError
  }
  r.kill = await Sandbox.kill(sbx.sandboxId, { apiKey: process.env.OTHER_KEY })
  const others = await Sandbox.list({ apiKey: process.env.OTHER_KEY }).nextItems()
  r.otherSeesIt = others.some((s) => s.sandboxId === sbx.sandboxId)
  try {
    await Sandbox.getInfo(sbx.sandboxId, { apiKey: process.env.OTHER_KEY })
    r.info = null
  } catch (e) {
    r.info = e.constructor.name
  }
  return r
})
await step('unknownTemplate', async () => {
  try {
    await Sandbox.create('no-such-template-xyz')
    return { threw: null }
  } catch (e) {
    return { threw: e.constructor.name, isSandboxError: e instanceof SandboxError, message: e.message }
  }
})
await step('timedOut', async () => {
  const t0 = Date.now()
  let running = await shortLived.isRunning()
  while (running && Date.now() - t0 < 5000) {
    await new Promise((r) => setTimeout(r, 250))
    running = await shortLived.isRunning()
  }
  let info
  try {
    await Sandbox.getInfo(shortLived.sandboxId)
    info = null
  } catch (e) {
    info = e.constructor.name
  }
  return { running, info }
})
await step('forkAndSnapshot', async () => {
  await sbx.files.write('/tmp/carried.txt', 'from the parent')
  const [child] = await sbx.fork()
  if (child instanceof Error) return { forkError: child.constructor.name, message: child.message }
  const inChild = (await child.commands.run('cat /tmp/carried.txt')).stdout
  await child.kill()
  const snap = await sbx.createSnapshot({ name: 'e2b-snap' })
  const listed = (await Sandbox.listSnapshots().nextItems()).map((s) => s.snapshotId)
  const fromSnap = await Sandbox.create(snap.snapshotId)
  const inSnap = (await fromSnap.commands.run('cat /tmp/carried.txt')).stdout
  const template = (await fromSnap.getInfo()).templateId
  await fromSnap.kill()
  const deleted = await Sandbox.deleteSnapshot(snap.snapshotId)
  return { child: child.sandboxId, inChild, snapshotId: snap.snapshotId, listed, fromSnap: fromSnap.sandboxId, inSnap, template, deleted }
})
await step('rateLimited', async () => {
  // the server under test lets an organization create 4 sandboxes an hour (main, short-lived,
  // fork, from the snapshot): this is the fifth
  try {
    const extra = await Sandbox.create('base')
    await extra.kill()
    return { threw: null }
  } catch (e) {
    return { threw: e.constructor.name, isRateLimit: e instanceof RateLimitError, message: e.message }
  }
})
await step('kill', async () => {
  const killed = await sbx.kill()
  const again = await Sandbox.kill(sbx.sandboxId)
  let info
  try {
    await Sandbox.getInfo(sbx.sandboxId)
    info = null
  } catch (e) {
    info = e.constructor.name
  }
  let run
  try {
    await sbx.commands.run('echo after kill')
    run = null
  } catch (e) {
    run = e.constructor.name
  }
  return { killed, again, info, run }
})
console.log(JSON.stringify(out))
