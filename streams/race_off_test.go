//go:build !race

package streams

const raceBuild = false
