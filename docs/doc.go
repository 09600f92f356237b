// Package docs holds no code: its tests keep the descriptions of the gateway's APIs true to the
// server and to each other.
//
//   - protocol.md, the realtime API's reference for people (guide.md, the walkthroughs beside
//     it); asyncapi.yaml, the same for programs;
//   - openapi.yaml, the REST API; operations.md, configuration.md, runbooks.md, capacity.md,
//     limits-history.md, design.md, identity-provider.md, internals.md (for contributors),
//     benchmarks.md and the run logs of benchmarks/ are prose only.
//
// The tests compare the protocol table's methods, notifications and error codes (with rpc's),
// and the gateway's close codes, with both descriptions of the realtime API, the fields of
// the auth result's limits with those and with both clients' Limits, its examples with each
// other, and the REST routes the server serves (httpapi.Router's Endpoints) with openapi.yaml. The descriptions are validated under Node.js by check.mjs with
// the npm packages of package.json (the AsyncAPI parser, an OpenAPI 3.1 validator, Ajv for
// the examples); without them the tests skip, except with CI=true, where they fail.
//
// TestDocuments checks every Markdown document of the repository (README.md and the others at
// the root, docs/*.md and docs/benchmarks/*.md, each directory's README.md): its relative links and their anchors
// resolve, the repository paths it names in backticks exist, no sentence of ten words or more
// appears twice in it, no paragraph starts with a lower-case word and no prose line is longer
// than 120 characters (signs of a splice), and it points at nothing outside the repository.
package docs
