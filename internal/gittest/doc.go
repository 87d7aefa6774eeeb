// Package gittest is how the tests run the real git CLI: Git and GitIn
// run a command and fail the test when git does; Command prepares one
// for a test that feeds it otherwise, times it or expects it to fail.
// Each runs with no system configuration, a HOME of the test's own and a
// fixed identity (user.name gittest), so what the machine's user has
// configured changes nothing; a test's own -c or environment still wins.
//
// Fsck checks one repository with git fsck --strict; FsckAtEnd, and
// TempDir (a t.TempDir that does the same), check every git repository
// at or under a folder once the test is over, after the cleanups
// registered later (a repository's Close), so every end-to-end test ends
// with git's own verdict on what it left. A test that damages a
// repository on purpose says so with Damaged, and the reason is logged.
// A test that must not run in parallel with others says why with Serial.
package gittest
