//go:build !race

package gateway_test

const raceBuild = false
