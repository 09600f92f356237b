// Checks the machine-readable API descriptions beside this file:
//
//   asyncapi.yaml  with the official AsyncAPI parser: no diagnostics, warnings included
//   openapi.yaml   against the OpenAPI 3.1 schema, with every $ref resolved
//   both           every example valid against the schema it illustrates
//
// Usage: node check.mjs [--json] [--responses FILE]
//
//   --json       prints both documents as one JSON object, {"asyncapi": ..., "openapi": ...},
//                for the Go tests of package docs
//   --responses  also checks the server's answers in FILE (written by TestOpenAPIResponses):
//                a JSON array of {path, method, status, contentType, headers, body}, each of
//                which must be a response openapi.yaml documents for its operation, with its
//                content type and schema, its required headers, and valid values in the others
//
// Exit status 1 with the problems on stderr when a check fails.
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

import { Parser, DiagnosticSeverity } from '@asyncapi/parser';
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv from 'ajv';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import YAML from 'yaml';

const dir = path.dirname(fileURLToPath(import.meta.url));
const problems = [];

async function load(name) {
  const text = await readFile(path.join(dir, name), 'utf8');
  try {
    return { text, doc: YAML.parse(text, { prettyErrors: true, uniqueKeys: true, strict: true }) };
  } catch (err) {
    console.error(`${name}: ${err.message}`);
    process.exit(1);
  }
}

// newAjv compiles schemas strictly (unknown keywords and types are errors; a "required" may
// name a property defined elsewhere, as "not": {"required": ["id"]} does), with the
// description's own top-level fields as keywords that check nothing, so that a $ref into
// the document resolves without the document itself being read as a schema.
function newAjv(Class, doc, id) {
  const ajv = new Class({ strict: true, strictRequired: false, allowUnionTypes: true, allErrors: true });
  addFormats(ajv);
  for (const k of Object.keys(doc)) ajv.addKeyword({ keyword: k });
  ajv.addSchema(doc, id);
  return ajv;
}

function pointer(parts) {
  return '#/' + parts.map((p) => String(p).replaceAll('~', '~0').replaceAll('/', '~1')).join('/');
}

function check(ajv, id, where, schemaPath, value) {
  let validate;
  try {
    validate = ajv.compile({ $ref: id + pointer(schemaPath) });
  } catch (err) {
    problems.push(`${where}: the schema does not compile: ${err.message}`);
    return;
  }
  if (!validate(value)) {
    const errs = validate.errors.map((e) => `${e.instancePath || '/'} ${e.message} (${e.schemaPath})`);
    problems.push(`${where}: the example does not match its schema:\n    ${errs.join('\n    ')}`);
  }
}

// schemaExamples checks every "examples" array of a schema against that schema.
function schemaExamples(ajv, id, doc, where, at) {
  const walk = (node, parts) => {
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...parts, i]));
      return;
    }
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node.examples) && (node.type !== undefined || node.$ref !== undefined || node.properties)) {
      node.examples.forEach((ex, i) => check(ajv, id, `${where} ${pointer(parts)}/examples/${i}`, parts, ex));
    }
    for (const [k, v] of Object.entries(node)) walk(v, [...parts, k]);
  };
  walk(at.reduce((n, k) => n?.[k], doc), at);
}

async function checkAsyncAPI() {
  const { text, doc } = await load('asyncapi.yaml');
  const parser = new Parser();
  const { document, diagnostics } = await parser.parse(text);
  for (const d of diagnostics) {
    // The AsyncAPI version is chosen (3.0.0, what most tools read today): not a finding.
    if (d.code === 'asyncapi-latest-version') continue;
    const sev = Object.keys(DiagnosticSeverity).find((k) => DiagnosticSeverity[k] === d.severity) ?? d.severity;
    problems.push(`asyncapi.yaml: ${sev} ${d.code} at ${(d.path ?? []).join('.')}: ${d.message}`);
  }
  if (!document) problems.push('asyncapi.yaml: the parser returned no document');

  // AsyncAPI schemas are JSON Schema draft 7 (Ajv's default dialect).
  const id = 'asyncapi.json';
  const ajv = newAjv(Ajv, doc, id);
  let n = 0;
  for (const [name, msg] of Object.entries(doc.components?.messages ?? {})) {
    for (const [i, ex] of (msg.examples ?? []).entries()) {
      check(ajv, id, `asyncapi.yaml components.messages.${name}.examples[${i}]`, ['components', 'messages', name, 'payload'], ex.payload);
      n++;
    }
  }
  if (n === 0) problems.push('asyncapi.yaml: no message examples');
  schemaExamples(ajv, id, doc, 'asyncapi.yaml', ['components', 'schemas']);
  schemaExamples(ajv, id, doc, 'asyncapi.yaml', ['channels']);
  return doc;
}

async function checkOpenAPI() {
  const { doc } = await load('openapi.yaml');
  const validator = new Validator();
  const res = await validator.validate(structuredClone(doc));
  if (!res.valid) {
    problems.push(`openapi.yaml: not a valid OpenAPI document:\n    ${JSON.stringify(res.errors, null, 2).replaceAll('\n', '\n    ')}`);
    return doc;
  }
  if (validator.version !== '3.1') problems.push(`openapi.yaml: OpenAPI ${validator.version}, want 3.1`);
  try {
    validator.resolveRefs();
  } catch (err) {
    problems.push(`openapi.yaml: ${err.message}`);
  }

  // OpenAPI 3.1 schemas are JSON Schema 2020-12. Media types, parameters and headers carry
  // "example" or a map of "examples" beside their "schema".
  const id = 'openapi.json';
  const ajv = newAjv(Ajv2020, doc, id);
  const resolve = (node) => {
    while (node && typeof node.$ref === 'string') {
      node = node.$ref.slice(2).split('/').map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~')).reduce((n, k) => n?.[k], doc);
    }
    return node;
  };
  let n = 0;
  const walk = (node, parts) => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      node.forEach((v, i) => walk(v, [...parts, i]));
      return;
    }
    if (parts[0] !== 'components' || parts[1] !== 'schemas') {
      if (node.schema && 'example' in node) {
        check(ajv, id, `openapi.yaml ${pointer(parts)}/example`, [...parts, 'schema'], node.example);
        n++;
      }
      if (node.schema && node.examples && !Array.isArray(node.examples)) {
        for (const [name, ex] of Object.entries(node.examples)) {
          const e = resolve(ex);
          if (!e || !('value' in e)) {
            problems.push(`openapi.yaml ${pointer(parts)}/examples/${name}: no value`);
            continue;
          }
          check(ajv, id, `openapi.yaml ${pointer(parts)}/examples/${name}`, [...parts, 'schema'], e.value);
          n++;
        }
      }
    }
    for (const [k, v] of Object.entries(node)) {
      if (k === 'schema') continue;
      walk(v, [...parts, k]);
    }
  };
  walk(doc.paths, ['paths']);
  walk(doc.components, ['components']);
  if (n === 0) problems.push('openapi.yaml: no examples');
  schemaExamples(ajv, id, doc, 'openapi.yaml', ['components', 'schemas']);
  return doc;
}

// checkResponses validates recorded answers of the server against openapi.yaml.
async function checkResponses(doc, file) {
  const exchanges = JSON.parse(await readFile(file, 'utf8'));
  const id = 'openapi.json';
  const ajv = newAjv(Ajv2020, doc, id);
  const refPath = (ref) => ref.slice(2).split('/').map((p) => p.replaceAll('~1', '/').replaceAll('~0', '~'));
  const get = (parts) => parts.reduce((n, k) => n?.[k], doc);
  for (const x of exchanges) {
    const where = `${x.method} ${x.path} answered ${x.status}`;
    // A method the path does not serve has no operation: its 405 is MethodNotAllowed.
    const op = doc.paths?.[x.path]?.[x.method.toLowerCase()];
    if (!doc.paths?.[x.path] || (!op && x.status !== 405)) {
      problems.push(`${where}: openapi.yaml has no such operation`);
      continue;
    }
    let base = ['paths', x.path, x.method.toLowerCase(), 'responses', String(x.status)];
    if (!op || (!get(base) && x.status === 405)) base = ['components', 'responses', 'MethodNotAllowed'];
    if (!get(base)) {
      problems.push(`${where}: a status openapi.yaml does not document for it`);
      continue;
    }
    while (typeof get(base).$ref === 'string') base = refPath(get(base).$ref);
    const resp = get(base);
    if (resp.content) {
      if (!resp.content[x.contentType]) {
        problems.push(`${where}: content type ${x.contentType}, documented ${Object.keys(resp.content).join(', ')}`);
      } else {
        check(ajv, id, where, [...base, 'content', x.contentType, 'schema'], x.body);
      }
    } else if (x.body !== null && x.body !== '') {
      problems.push(`${where}: a body, where openapi.yaml documents none`);
    }
    const headers = Object.fromEntries(Object.entries(x.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    for (const [name, h] of Object.entries(resp.headers ?? {})) {
      let hdr = h;
      let parts = [...base, 'headers', name];
      while (typeof hdr.$ref === 'string') {
        parts = refPath(hdr.$ref);
        hdr = get(parts);
      }
      const values = headers[name.toLowerCase()];
      if (!values) {
        if (hdr.required) problems.push(`${where}: no ${name} header`);
        continue;
      }
      let value = values[0];
      if (hdr.schema?.type === 'integer' && /^[0-9]+$/.test(value)) value = Number(value);
      check(ajv, id, `${where}, header ${name}`, [...parts, 'schema'], value);
    }
  }
  if (exchanges.length === 0) problems.push(`${file}: no responses`);
}

const asyncapi = await checkAsyncAPI();
const openapi = await checkOpenAPI();
const responses = process.argv.indexOf('--responses');
if (responses > 0 && problems.length === 0) await checkResponses(openapi, process.argv[responses + 1]);
if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
if (process.argv.includes('--json')) {
  process.stdout.write(JSON.stringify({ asyncapi, openapi }));
} else if (responses > 0) {
  console.log('the server\'s answers match openapi.yaml');
} else {
  console.log('asyncapi.yaml and openapi.yaml: valid, and so are their examples');
}
