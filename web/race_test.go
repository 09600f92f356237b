//go:build race

package web

func init() { raceEnabled = true }
