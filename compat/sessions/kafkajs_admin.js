// kafkajs admin session.
//
// createTopics (3 partitions; partitions and replication factor left to the cluster; an explicit
// assignment; configs; validateOnly; an existing topic, which kafkajs reports as `false`),
// listTopics, fetchTopicMetadata, createPartitions, describeConfigs (topic and broker),
// alterConfigs (and validateOnly), describeCluster (Metadata), deleteTopics (and an unknown
// topic's UNKNOWN_TOPIC_OR_PARTITION); after the failover pause everything acknowledged is still
// there.
//
// Arguments: --bootstrap HOST:PORT[,...] [--through-failover DIR] [--pause-timeout-s S]
//            [--settle-s S] [--prefix P] [--broker-ids ID,...]   (as the Python sessions; see common.py)
'use strict'

const fs = require('fs')
const path = require('path')
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

class WrongAnswer extends Error {}

function parseArgs (argv) {
  const args = { pauseTimeoutS: 300, settleS: 30 }
  for (let i = 0; i < argv.length; i += 2) {
    const [k, val] = [argv[i], argv[i + 1]]
    if (val === undefined) usage(`${k} needs a value`)
    if (k === '--bootstrap') args.bootstrap = val
    else if (k === '--controller-bootstrap') args.controllerBootstrap = val // not used by kafkajs
    else if (k === '--through-failover') args.throughFailover = val
    else if (k === '--pause-timeout-s') args.pauseTimeoutS = Number(val)
    else if (k === '--settle-s') args.settleS = Number(val)
    else if (k === '--prefix') args.prefix = val
    else if (k === '--broker-ids') args.brokerIds = val.split(',').map(Number).sort((x, y) => x - y)
    else usage(`unknown argument ${k}`)
  }
  if (!args.bootstrap) usage('--bootstrap is required')
  return args
}

function usage (message) {
  console.error(`kafkajs_admin.js: ${message}`)
  process.exit(2)
}

const args = parseArgs(process.argv.slice(2))
const started = process.hrtime.bigint()
const elapsed = () => Number(process.hrtime.bigint() - started) / 1e9
const log = message => console.log(`[kafkajs ${elapsed().toFixed(2).padStart(7)}s] ${message}`)
const prefix = args.prefix ||
  `compat-kafkajs-${String(Date.now() % 1e9).padStart(9, '0')}-${String(process.pid % 1000).padStart(3, '0')}-`
const topic = suffix => prefix + suffix
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

function check (condition, message) {
  if (!condition) throw new WrongAnswer(message)
}

function checkEq (got, want, what) {
  const [g, w] = [JSON.stringify(got), JSON.stringify(want)]
  if (g !== w) throw new WrongAnswer(`${what}: got ${g}, want ${w}`)
}

function fail (message) {
  log(`FAIL ${message}`)
  process.exit(1)
}

async function step (name, fn) {
  const t0 = elapsed()
  let result
  try {
    result = await fn()
  } catch (e) {
    if (e instanceof WrongAnswer) fail(`step '${name}': wrong answer: ${e.message}`)
    console.error(e)
    fail(`step '${name}': ${e.name}: ${e.message}${e.type ? ` (${e.type})` : ''}`)
  }
  log(`ok   ${name} (${Math.round((elapsed() - t0) * 1000)} ms)`)
  return result
}

// After the failover pause, an operation kafkajs reports as refused by the node it chose (the
// killed one) never reached a server: it is tried again, with the same client (kafkajs refreshes
// its metadata on every admin call), for at most --settle-s, and each retry is logged. An
// operation that reached a server is never retried (see common.py).
let failedOver = false
let retriesAfterFailover = 0

function undelivered (e) {
  for (let x = e; x; x = x.cause) {
    if (x.name === 'KafkaJSConnectionError' && /ECONNREFUSED/.test(`${x.code} ${x.message}`)) return true
  }
  return false
}

function retryUndelivered (e, deadline) {
  if (!failedOver || !undelivered(e) || elapsed() >= deadline) return false
  retriesAfterFailover += 1
  log(`retry: undelivered after the failover (${e.name}: ${e.message})`)
  return true
}

// Runs one client operation (a write), retried after the failover only when undelivered.
async function call (fn) {
  const deadline = elapsed() + args.settleS
  let delay = 200
  for (;;) {
    try {
      return await fn()
    } catch (e) {
      if (e instanceof WrongAnswer || !retryUndelivered(e, deadline)) throw e
    }
    await sleep(delay)
    delay = Math.min(delay * 2, 2000)
  }
}

// Repeats a read until it matches, for at most --settle-s (a broker's metadata lags its controller).
async function eventually (fn, what) {
  const deadline = elapsed() + args.settleS
  let delay = 50
  for (;;) {
    try {
      return await fn()
    } catch (e) {
      if (e instanceof WrongAnswer) {
        if (elapsed() >= deadline) throw new WrongAnswer(`${what} (still after ${args.settleS} s): ${e.message}`)
      } else if (!retryUndelivered(e, deadline)) {
        throw e
      }
    }
    await sleep(delay)
    delay = Math.min(delay * 2, 1000)
  }
}

async function pause () {
  if (!args.throughFailover) return false
  fs.mkdirSync(args.throughFailover, { recursive: true })
  fs.writeFileSync(path.join(args.throughFailover, 'paused'), 'kafkajs\n')
  const resume = path.join(args.throughFailover, 'resume')
  log(`paused: waiting for ${resume}`)
  const deadline = elapsed() + args.pauseTimeoutS
  while (!fs.existsSync(resume)) {
    if (elapsed() >= deadline) fail(`nobody created ${resume} within ${args.pauseTimeoutS} s`)
    await sleep(100)
  }
  log('resumed')
  failedOver = true
  return true
}

async function main () {
  const kafka = new Kafka({
    clientId: 'compat-kafkajs',
    brokers: args.bootstrap.split(','),
    logLevel: logLevel.ERROR,
    requestTimeout: 30000,
    connectionTimeout: 3000
  })
  const admin = kafka.admin()
  await step('connect', () => admin.connect())

  // What the cluster acknowledged; checked again after the failover pause.
  const ackedTopics = new Map()
  const ackedDeleted = new Set()
  const ackedConfigs = new Map()

  const describeCluster = async () => {
    const d = await admin.describeCluster()
    const ids = d.brokers.map(b => b.nodeId).sort((x, y) => x - y)
    check(ids.length > 0, 'describeCluster: no brokers')
    check(d.clusterId, 'describeCluster: empty cluster id')
    check(ids.includes(d.controller), `controller ${d.controller} is not one of the brokers ${ids}`)
    return ids
  }
  const nodes = await step('describe cluster (Metadata)', describeCluster)
  // The brokers replicas go to: --broker-ids (where the cluster also lists controllers), else all.
  const brokers = await step('replica brokers', () => {
    if (!args.brokerIds) return nodes
    const missing = args.brokerIds.filter(id => !nodes.includes(id))
    check(missing.length === 0, `--broker-ids ${missing} not among the nodes the cluster lists ${nodes}`)
    return args.brokerIds
  })
  const rf = Math.min(3, brokers.length)
  const [a, b, c, d, v, e] = ['a', 'b', 'c', 'd', 'v', 'e'].map(topic)
  const dConfigs = { 'cleanup.policy': 'compact', 'retention.ms': '86400000' }
  const entries = obj => Object.entries(obj).map(([name, value]) => ({ name, value }))

  await step('create topics (3 partitions; -1/-1; explicit assignment; configs)', async () => {
    const created = await admin.createTopics({
      timeout: 30000,
      topics: [
        { topic: a, numPartitions: 3, replicationFactor: rf },
        { topic: b }, // partitions and replication factor -1: the cluster's defaults
        {
          topic: c,
          replicaAssignment: [{ partition: 0, replicas: [brokers[0]] },
            { partition: 1, replicas: [brokers[brokers.length - 1]] }]
        },
        { topic: d, numPartitions: 1, replicationFactor: rf, configEntries: entries(dConfigs) }
      ]
    })
    checkEq(created, true, 'createTopics result')
    ackedTopics.set(a, 3).set(c, 2).set(d, 1)
    ackedConfigs.set(d, dConfigs)
  })
  await step('create topic validateOnly', async () => {
    checkEq(await admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic: v, numPartitions: 2, replicationFactor: rf }] }),
      true, 'validateOnly result')
  })
  await step('create existing topic -> false (TOPIC_ALREADY_EXISTS)', async () => {
    checkEq(await admin.createTopics({ topics: [{ topic: a, numPartitions: 3, replicationFactor: rf }] }),
      false, 'createTopics of an existing topic')
  })

  const listed = async () => {
    const names = new Set(await admin.listTopics())
    for (const name of ackedTopics.keys()) check(names.has(name), `topic ${name} missing from listTopics`)
    for (const name of [...ackedDeleted, v]) check(!names.has(name), `topic ${name} listed but deleted or validateOnly`)
    const md = await admin.fetchTopicMetadata({ topics: [...ackedTopics.keys()] })
    const byName = new Map(md.topics.map(t => [t.name, t]))
    for (const [name, n] of ackedTopics) checkEq(byName.get(name).partitions.length, n, `partitions of ${name}`)
    return byName
  }

  await step('list topics and fetch topic metadata', () => eventually(async () => {
    await listed()
    const md = await admin.fetchTopicMetadata({ topics: [a, b, c] })
    const t = new Map(md.topics.map(x => [x.name, x]))
    check(t.get(b).partitions.length >= 1, `${b} has no partitions`)
    ackedTopics.set(b, t.get(b).partitions.length)
    const replicas = Object.fromEntries(t.get(c).partitions.map(p => [p.partitionId, p.replicas]))
    checkEq(replicas, { 0: [brokers[0]], 1: [brokers[brokers.length - 1]] }, `replicas of ${c} (explicit assignment)`)
    checkEq(t.get(a).partitions[0].replicas.length, rf, `replication factor of ${a}`)
  }, 'topics not as created'))

  await step('create partitions 3 -> 5', async () => {
    await admin.createPartitions({ timeout: 30000, topicPartitions: [{ topic: a, count: 5 }] })
    ackedTopics.set(a, 5)
    await eventually(listed, 'partition count after createPartitions')
  })

  const configs = async (type, name) => {
    const r = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type, name }] })
    checkEq(r.resources.length, 1, 'describeConfigs resources')
    checkEq(r.resources[0].errorCode, 0, `describeConfigs error of ${name}`)
    return new Map(r.resources[0].configEntries.map(x => [x.configName, x]))
  }
  const checkConfigs = async (name, want) => {
    const got = await configs(ConfigResourceTypes.TOPIC, name)
    for (const [k, val] of Object.entries(want)) {
      check(got.has(k), `${name}: config ${k} not described`)
      checkEq(got.get(k).configValue, val, `${name} ${k}`)
      checkEq(got.get(k).isDefault, false, `${name} ${k} isDefault`)
    }
    return got
  }

  await step('describe topic configs', () => eventually(async () => {
    const got = await checkConfigs(d, dConfigs)
    for (const k of ['retention.bytes', 'segment.bytes', 'min.insync.replicas', 'max.message.bytes', 'compression.type']) {
      check(got.has(k), `${d}: default config ${k} not described`)
    }
  }, 'configs set at creation'))

  await step('describe broker configs', async () => {
    const got = await configs(ConfigResourceTypes.BROKER, String(brokers[0]))
    for (const k of ['num.partitions', 'default.replication.factor', 'log.segment.bytes']) {
      check(got.has(k), `broker ${brokers[0]}: config ${k} not described`)
    }
  })

  await step('alter configs (and validateOnly)', async () => {
    const alter = (configEntries, validateOnly) => admin.alterConfigs({
      validateOnly, resources: [{ type: ConfigResourceTypes.TOPIC, name: a, configEntries }]
    })
    const r = await alter(entries({ 'retention.ms': '3600000' }), false)
    checkEq(r.resources.map(x => x.errorCode), [0], 'alterConfigs error code')
    ackedConfigs.set(a, { 'retention.ms': '3600000' })
    await eventually(() => checkConfigs(a, ackedConfigs.get(a)), 'config after alterConfigs')
    await alter(entries({ 'retention.ms': '1000' }), true)
    await checkConfigs(a, ackedConfigs.get(a))
  })

  await step('delete topics (and an unknown one -> UNKNOWN_TOPIC_OR_PARTITION)', async () => {
    await admin.deleteTopics({ topics: [b], timeout: 30000 })
    ackedTopics.delete(b)
    ackedDeleted.add(b)
    await eventually(listed, 'topics after delete')
    // kafkajs retries UNKNOWN_TOPIC_OR_PARTITION (for about 10 s by default) before it gives up:
    // a second admin client without retries asks once.
    const once = kafka.admin({ retry: { retries: 0 } })
    await once.connect()
    let err = null
    try {
      await once.deleteTopics({ topics: [topic('never-created')], timeout: 30000 })
    } catch (e) {
      err = e
    }
    await once.disconnect()
    check(err !== null, 'delete of an unknown topic succeeded')
    const type = err.type || (err.cause && err.cause.type)
    checkEq(type, 'UNKNOWN_TOPIC_OR_PARTITION', `delete of an unknown topic (${err.message})`)
  })

  if (await pause()) {
    await step('after failover: acknowledged topics still there', () => eventually(listed, 'topics'))
    for (const [name, cfg] of ackedConfigs) {
      await step(`after failover: configs of ${name} still set`, () => eventually(() => checkConfigs(name, cfg), 'configs'))
    }
    await step('after failover: describe cluster', () => call(describeCluster))
  }

  await step('create one more topic', async () => {
    checkEq(await call(() => admin.createTopics({ timeout: 30000, topics: [{ topic: e, numPartitions: 1 }] })),
      true, 'createTopics result')
    ackedTopics.set(e, 1)
    await eventually(listed, 'topic created last')
  })
  await step("delete the session's topics", async () => {
    const names = [...ackedTopics.keys()]
    await call(() => admin.deleteTopics({ topics: names, timeout: 30000 }))
    names.forEach(n => ackedDeleted.add(n))
    ackedTopics.clear()
    await eventually(listed, 'topics after the final delete')
  })
  await admin.disconnect()
  const retries = retriesAfterFailover ? `; ${retriesAfterFailover} undelivered operation(s) retried after the failover` : ''
  log(`PASS (${elapsed().toFixed(1)} s${retries})`)
}

main().catch(e => {
  console.error(e)
  fail(`${e.name}: ${e.message}`)
})
