// Reads one Iceberg table with icebird (an independent JavaScript reader)
// and prints it as JSON on stdout: the current schema, snapshot, rows and
// live files. The Go side (icebird.go) runs it with node.
//
// Environment:
//   ICEBIRD_MODULES  node_modules folder holding icebird (bin/tools/node_modules)
//   ICEBIRD_METADATA the table's metadata file location (from the catalog)
//   ICEBIRD_SOURCES  JSON [[locationPrefix, httpBase], ...]: a location that
//                    starts with locationPrefix is fetched from httpBase + rest
import { inflateRawSync } from 'node:zlib'
import { pathToFileURL } from 'node:url'
import path from 'node:path'

const modules = process.env.ICEBIRD_MODULES
const lib = rel => import(pathToFileURL(path.join(modules, rel)).href)
const { icebergRead, icebergManifests } = await lib('icebird/src/index.js')
const { DEFAULT_PARSERS } = await lib('hyparquet/src/convert.js')

// Microsecond timestamps: hyparquet's default turns them into JavaScript
// Dates (milliseconds) and icebird passes no parsers of its own, so its
// defaults are replaced: timestamps become RFC 3339 strings in UTC with six
// fractional digits, dates YYYY-MM-DD. Strings also compare with === where
// icebird matches equality deletes (two Dates never do).
DEFAULT_PARSERS.timestampFromMicroseconds = micros => {
  let ms = micros / 1000n
  let us = micros % 1000n
  if (us < 0n) { ms -= 1n; us += 1000n }
  return new Date(Number(ms)).toISOString().replace('Z', String(us).padStart(3, '0') + 'Z')
}
DEFAULT_PARSERS.dateFromDays = days => new Date(days * 86400000).toISOString().slice(0, 10)

// Table locations (file://, s3://, gs://, azblob://, abfs[s]://) are served
// by the Go side on loopback. icebird itself rewrites s3:// to
// https://<bucket>.s3.amazonaws.com/<key> before fetching: mapped back here.
const sources = JSON.parse(process.env.ICEBIRD_SOURCES)
function toLoopback(url) {
  const aws = /^https:\/\/([^/.]+)\.s3\.amazonaws\.com\//.exec(url)
  if (aws) url = `s3://${aws[1]}/${url.slice(aws[0].length)}`
  for (const [prefix, base] of sources) {
    if (url === prefix || url.startsWith(prefix.replace(/\/*$/, '/'))) {
      return base + url.slice(prefix.length).replace(/^\/*/, '').split('/').map(encodeURIComponent).join('/')
    }
  }
  throw new Error(`no source serves ${url} (sources: ${sources.map(s => s[0]).join(', ')})`)
}

const realFetch = globalThis.fetch
globalThis.fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input)
  const res = await realFetch(toLoopback(url), init)
  if (!res.ok && res.status !== 416) throw new Error(`${init?.method ?? 'GET'} ${url}: ${res.status} ${await res.text()}`)
  const ranged = new Headers(init?.headers).has('Range')
  if (ranged || !url.endsWith('.avro')) return res
  return new Response(inflateAvro(new Uint8Array(await res.arrayBuffer())), { status: res.status })
}

// inflateAvro rewrites an Avro object container file with deflate blocks
// into the same file with codec "null". The Avro spec's deflate codec is raw
// deflate (RFC 1951, no zlib or gzip header), which iceberg-go writes; the
// gunzip icebird 0.3.1 bundles (hyparquet-compressors 1.1.1) decodes the
// first deflate stream, then skips 8 bytes as if a gzip trailer followed
// and decodes what comes after as another member: on iceberg-go's manifests
// that fails ("RangeError: offset is out of bounds"). Node's
// zlib.inflateRawSync reads the blocks as the spec says.
function inflateAvro(buf) {
  if (buf.length < 4 || buf[0] !== 0x4f || buf[1] !== 0x62 || buf[2] !== 0x6a || buf[3] !== 1) return buf
  let off = 4
  const long = () => { // zigzag varint
    let n = 0, mul = 1, b
    do { b = buf[off++]; n += (b & 0x7f) * mul; mul *= 128 } while (b & 0x80)
    return n % 2 ? -(n + 1) / 2 : n / 2
  }
  const bytes = () => { const n = long(); off += n; return buf.subarray(off - n, off) }
  const meta = []
  for (let count = long(); count !== 0; count = long()) {
    if (count < 0) { count = -count; long() } // block size
    for (let i = 0; i < count; i++) meta.push([new TextDecoder().decode(bytes()), bytes()])
  }
  const codec = meta.find(([k]) => k === 'avro.codec')
  if (!codec || new TextDecoder().decode(codec[1]) !== 'deflate') return buf
  codec[1] = new TextEncoder().encode('null')
  const sync = buf.subarray(off, off + 16)
  off += 16

  const out = []
  const putLong = n => { // zigzag varint, n >= 0
    n *= 2
    const b = []
    while (n >= 128) { b.push((n % 128) | 0x80); n = Math.floor(n / 128) }
    b.push(n)
    out.push(Uint8Array.from(b))
  }
  const putBytes = b => { putLong(b.length); out.push(b) }
  out.push(buf.subarray(0, 4))
  putLong(meta.length)
  for (const [k, v] of meta) { putBytes(new TextEncoder().encode(k)); putBytes(v) }
  putLong(0)
  out.push(sync)
  while (off < buf.length) {
    const records = long()
    const block = inflateRawSync(bytes())
    putLong(records)
    putBytes(block)
    out.push(buf.subarray(off, off + 16)) // sync marker
    off += 16
  }
  return Buffer.concat(out)
}

const metadataLocation = process.env.ICEBIRD_METADATA
const text = await (await fetch(metadataLocation)).text()
const metadata = JSON.parse(text)
// Snapshot ids are 64-bit: JSON.parse rounds them, so the digits are taken
// from the text.
const snapshotId = /"current-snapshot-id"\s*:\s*(-?\d+)/.exec(text)?.[1] ?? '-1'
const schema = metadata.schemas.find(s => s['schema-id'] === metadata['current-schema-id'])

const result = {
  snapshotId,
  schema: schema.fields.map(f => ({ id: f.id, name: f.name, type: f.type, required: f.required })),
  rows: [],
  files: [],
}
if (snapshotId !== '-1') {
  for (const { entries } of await icebergManifests(metadata)) {
    for (const { status, sequence_number, data_file: f } of entries) {
      if (status === 2) continue // deleted in this snapshot
      result.files.push({
        path: f.file_path,
        content: f.content ?? 0,
        format: f.file_format,
        recordCount: f.record_count,
        sizeBytes: f.file_size_in_bytes,
        sequenceNumber: sequence_number,
        partition: f.partition,
        equalityIds: f.equality_ids ?? null,
      })
    }
  }
  // icebergRead refuses a snapshot without data files; its rows are none.
  if (result.files.some(f => f.content === 0)) {
    result.rows = await icebergRead({ tableUrl: metadata.location, metadata })
  }
}

// 64-bit integers (JavaScript BigInt) print as strings, binary as base64,
// missing values as null, non-finite floats as strings.
process.stdout.write(JSON.stringify(result, (_, v) => {
  if (typeof v === 'bigint') return v.toString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('base64')
  if (v === undefined) return null
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v)
  return v
}))
