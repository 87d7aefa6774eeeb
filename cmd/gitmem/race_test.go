//go:build race

package main

// raceBuild: this test binary was built with -race.
const raceBuild = true
