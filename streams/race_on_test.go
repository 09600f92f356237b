//go:build race

package streams

// raceBuild: the race detector's build, many times slower; the property tests run fewer
// random cases in it.
const raceBuild = true
