// Package console is gitmem's web console, served at /console/ by
// `gitmem serve --http` (one memory) and `serve --stores` (many): the
// stores, a memory's folders and files, the timeline of its changes with
// their trailers and diffs (live: new changes appear as they land), a
// diff between any two points, blame, the repairs (revert, restore,
// expire, redact) each previewed and then confirmed, and the state of a
// shared memory (its remotes, the conflicts merges kept).
//
// It has no operation of its own: each page calls what the CLI and the
// JSON API call (package operator, gitmem's Repo, package stores). A
// repair is confirmed only as previewed (operator.ExpectChanges, checked
// under the writer lock), and is one commit attributed to the operator's
// token; a redaction rewrites the history, of this memory or also of a
// remote (gitmem redact --push: Repo.RedactShared).
//
// Pages are html/template, server-rendered, with one small script of
// progressive enhancement (the live timeline); the stylesheet and the
// script are embedded, so the binary needs nothing else. Security: an
// operator token logs in (agent tokens do not; a read-only token sees
// every page with its forms disabled, and its POSTs are refused); the session cookie is HttpOnly,
// SameSite=Strict, and Secure unless the page is reached by a loopback
// name; every form carries the session's CSRF token; every answer has a
// Content-Security-Policy that allows no inline script or style; and the
// server's Host and Origin checks come first (handler.HTTPOptions.Console).
// Memory content, file names and trailers are hostile: templates escape
// them, and the script inserts only nodes parsed from the server's own
// escaped pages.
package console
