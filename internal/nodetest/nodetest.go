// Package nodetest finds the npm test harnesses (testdata folders with a
// package.json and a package-lock.json, installed by test.sh with npm ci)
// for tests that drive a real JavaScript library with node.
package nodetest

import (
	"os"
	"path/filepath"
	"testing"
)

// Harness returns the absolute path of dir once the npm package pkg is
// installed in it. When it is not, the test is skipped, or fails under CI
// (CI set), where test.sh must have installed it.
func Harness(t testing.TB, dir, pkg string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(abs, "node_modules", filepath.FromSlash(pkg))); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed: run npm ci in %s", pkg, dir)
		}
		t.Skipf("%s is not installed (npm ci in %s)", pkg, dir)
	}
	return abs
}
