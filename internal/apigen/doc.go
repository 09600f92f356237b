// Package apigen writes what follows from package protocol's Go types, so that a method's
// params and results are written once, in Go: the browser client's wire types
// (web/src/client/wire.js, JSDoc from which its TypeScript declarations are generated) and the
// parts of docs/asyncapi.yaml that describe methods nobody described by hand (operations,
// messages and schemas, with protocol.md's examples). Field descriptions and type summaries come
// from protocol's source comments.
//
// Entry points: WireJS and AsyncAPI; the command in gen writes both files (make generate), and
// the tests of web and docs fail while either is not what they would write.
//
// Caveat: asyncapi.yaml's hand-written parts are kept as they are; the documents' tests hold
// them against the same types.
package apigen
