// Builds the board into dist/: bundles src/board/main.js and src/styles.css
// with esbuild into content-hashed files under dist/assets/, writes
// dist/index.html pointing at them, and records the hash of the sources in
// dist/build.json so that a Go test can tell when dist is out of date.
//
// Usage: node build.mjs [DIR]      (or: make -C web); DIR instead of dist/, as
// dist_test.go builds it afresh to compare.

import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as esbuild from 'esbuild';

const root = path.dirname(fileURLToPath(import.meta.url));
const dist = process.argv[2] ? path.resolve(process.argv[2]) : path.join(root, 'dist');

/**
 * sourceFiles lists what the build depends on, relative to web/, with "/"
 * separators, sorted: every file under src/, the build script and the
 * package manifests. dist_test.go lists the same.
 */
async function sourceFiles() {
  /** @type {string[]} */
  const out = ['build.mjs', 'package.json', 'package-lock.json'];
  /** @param {string} rel */
  async function walk(rel) {
    for (const e of await readdir(path.join(root, rel), { withFileTypes: true })) {
      const r = `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(r);
      else if (e.isFile()) out.push(r);
    }
  }
  await walk('src');
  return out.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * sourceHash is SHA-256 over "<path>\n<sha256 of the file, hex>\n" for each
 * source file in order, hex. dist_test.go computes the same.
 */
async function sourceHash() {
  const h = createHash('sha256');
  for (const f of await sourceFiles()) {
    const data = await readFile(path.join(root, f));
    h.update(`${f}\n${createHash('sha256').update(data).digest('hex')}\n`);
  }
  return h.digest('hex');
}

await rm(dist, { recursive: true, force: true });
await mkdir(path.join(dist, 'assets'), { recursive: true });

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: { app: 'src/board/main.js', style: 'src/styles.css' },
  bundle: true,
  format: 'esm',
  target: ['es2022', 'chrome111', 'firefox113', 'safari16.4'],
  minify: true,
  legalComments: 'eof',
  charset: 'utf8',
  entryNames: '[name]-[hash]',
  outdir: path.join(dist, 'assets'),
  metafile: true,
  logLevel: 'warning',
});

/** @type {Record<string, string>} */
const assets = {};
for (const [out, meta] of Object.entries(result.metafile.outputs)) {
  if (!meta.entryPoint) continue;
  assets[path.extname(out).slice(1)] = `assets/${path.basename(out)}`;
}
if (!assets.js || !assets.css) throw new Error(`unexpected outputs: ${JSON.stringify(assets)}`);

const html = (await readFile(path.join(root, 'src/index.html'), 'utf8'))
  .replace('{{js}}', assets.js)
  .replace('{{css}}', assets.css);
await writeFile(path.join(dist, 'index.html'), html);

const build = {
  source_hash: await sourceHash(),
  assets: Object.values(assets).sort(),
};
await writeFile(path.join(dist, 'build.json'), `${JSON.stringify(build, null, 2)}\n`);
console.log(`built ${path.relative(root, dist) || dist}/: ${build.assets.join(', ')} (sources ${build.source_hash.slice(0, 12)})`);
