package transfer

import (
	"context"
	"math"
	"sync/atomic"
	"unicode/utf8"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"
	"golang.org/x/sync/errgroup"

	"github.com/gitmem-dev/gitmem/gitmem"
	"github.com/gitmem-dev/gitmem/memstore"
	"github.com/gitmem-dev/gitmem/stores"
)

// ExportOptions say where a store is exported.
type ExportOptions struct {
	To       string // the id of a store there to copy into; "": a new store
	Parallel int    // requests in flight (0: 8)
}

// ExportResult is what an export did, or had done when it failed.
type ExportResult struct {
	StoreID   string // the store there ("" when none was made)
	New       bool   // made by this export
	Memories  int    // the gitmem store's memories
	History   int    // the gitmem store's versions, all of its history: not copied (the API writes only current content)
	Created   int    // memories made there
	Updated   int    // memories there at the same path, given the content
	Unchanged int    // memories there at the same path with the same content already
	Others    int    // memories there at other paths: left as they are
}

// Export copies the current memories of the gitmem store name to the
// Memory Stores API remote: into a new store with the same name,
// description and metadata, or into the store opt.To. A memory there at
// the same path gets the content (an update, on the condition that it
// still has the content listed: a new version there, none when it has it
// already); a memory at a path of its own is created (a new id: the API
// makes ids); memories there at other paths are left as they are. Only
// the current memories go: the API cannot write past versions.
//
// Export stops at the first request that fails (after the SDK's retries);
// what it copied stays, and the result says what that was. Running it
// again with To the store it made copies the rest: memories already
// copied are unchanged.
func Export(ctx context.Context, remote Remote, d *stores.Dir, name string, opt ExportOptions) (ExportResult, error) {
	var res ExportResult
	meta, mems, err := readExport(ctx, d, name, &res)
	if err != nil {
		return res, err
	}
	res.Memories = len(mems)
	if err := checkExportable(mems); err != nil {
		return res, err
	}
	c := remote.client()
	there, err := exportTarget(ctx, c, name, meta, opt.To, remote.maxListed(), &res)
	if err != nil {
		return res, err
	}
	for _, m := range mems {
		if _, ok := there[m.Path]; ok {
			res.Others--
		}
	}
	res.Others += len(there)
	err = copyMemories(ctx, c, mems, there, opt.Parallel, &res)
	return res, err
}

// readExport reads the gitmem store name's metadata and current
// memories (with their content), all of one commit, and sets
// res.History.
func readExport(ctx context.Context, d *stores.Dir, name string, res *ExportResult) (stores.Meta, []memstore.Item, error) {
	s, err := d.Acquire(ctx, name)
	if err != nil {
		return stores.Meta{}, nil, err
	}
	var meta stores.Meta
	var mems []memstore.Item
	err = s.Use(func(r *gitmem.Repo, m stores.Meta) error {
		meta = m
		// One listing: the memories of one commit.
		ix := memstore.NewIndex()
		if mems, _, err = ix.List(ctx, r, memstore.ListOptions{Limit: math.MaxInt, WithContent: true}); err != nil {
			return err
		}
		vs, _, err := ix.Versions(ctx, r, memstore.VersionFilter{}, "", math.MaxInt, false)
		res.History = len(vs)
		return err
	})
	s.Release()
	return meta, mems, err
}

// checkExportable says which of mems the API cannot hold: a path it
// refuses (the memory tool takes names the API does not: not in NFC, a
// format character), not UTF-8 text, or too long.
func checkExportable(mems []memstore.Item) error {
	for _, m := range mems {
		if _, err := memstore.ParsePath(m.Path); err != nil {
			return &ExportError{Path: m.Path, Msg: "has a path the API refuses: " + err.Error()}
		}
		if !utf8.Valid(m.Content) {
			return &ExportError{Path: m.Path, Msg: "is not UTF-8 text, and the API holds text"}
		}
		if len(m.Content) > memstore.MaxContentBytes {
			return &ExportError{Path: m.Path, Msg: "is over the API's 102,400 bytes"}
		}
	}
	return nil
}

// exportTarget makes the store there an export copies into (to: ""), or
// finds the store to and lists its memories by path. It sets
// res.StoreID and res.New.
func exportTarget(ctx context.Context, c anthropic.Client, name string, meta stores.Meta, to string, maxListed int,
	res *ExportResult) (map[string]anthropic.BetaManagedAgentsMemoryListItemUnion, error) {
	there := map[string]anthropic.BetaManagedAgentsMemoryListItemUnion{}
	if to == "" {
		params := anthropic.BetaMemoryStoreNewParams{Name: stores.Info{Name: name, Meta: meta}.Title(), Metadata: meta.Metadata}
		if meta.Description != "" {
			params.Description = param.NewOpt(meta.Description)
		}
		st, err := c.Beta.MemoryStores.New(ctx, params)
		if err != nil {
			return nil, remoteErr(err)
		}
		res.StoreID, res.New = st.ID, true
		return there, nil
	}
	st, err := c.Beta.MemoryStores.Get(ctx, to, anthropic.BetaMemoryStoreGetParams{})
	if err != nil {
		return nil, remoteErr(err)
	}
	res.StoreID = st.ID
	items, err := listMemories(ctx, c, st.ID, maxListed)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		there[it.Path] = it
	}
	return there, nil
}

// copyMemories writes mems to the store res.StoreID, parallel requests
// in flight (0: 8): an update of the memory there at the same path
// (unless it has the content), else a creation. It starts no request
// after the first that fails (those in flight finish), and sets
// res.Created, res.Updated and res.Unchanged to what it did.
func copyMemories(ctx context.Context, c anthropic.Client, mems []memstore.Item, there map[string]anthropic.BetaManagedAgentsMemoryListItemUnion,
	parallel int, res *ExportResult) error {
	var created, updated, unchanged atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	if parallel <= 0 {
		parallel = 8
	}
	g.SetLimit(parallel)
	for _, m := range mems {
		old, ok := there[m.Path]
		if ok && old.ContentSha256 == m.SHA256 {
			unchanged.Add(1)
			continue
		}
		if gctx.Err() != nil {
			break // a request failed: the rest waits for the next run
		}
		g.Go(func() error {
			if gctx.Err() != nil {
				return nil // a request failed while this one waited for its turn
			}
			// A request sent is not cancelled by another's failure: the
			// server may have made it, and what it made is counted.
			var got *anthropic.BetaManagedAgentsMemory
			var err error
			if ok {
				got, err = c.Beta.MemoryStores.Memories.Update(ctx, old.ID, anthropic.BetaMemoryStoreMemoryUpdateParams{MemoryStoreID: res.StoreID,
					Content: param.NewOpt(string(m.Content)), Precondition: anthropic.BetaManagedAgentsPreconditionParam{ContentSha256: param.NewOpt(old.ContentSha256)}})
			} else {
				got, err = c.Beta.MemoryStores.Memories.New(ctx, res.StoreID, anthropic.BetaMemoryStoreMemoryNewParams{Path: m.Path, Content: param.NewOpt(string(m.Content))})
			}
			if err != nil {
				return remoteErr(err)
			}
			if got.ContentSha256 != m.SHA256 || got.Path != m.Path {
				return &ExportError{Path: m.Path, Msg: "came back with another content_sha256 or path (" + got.ContentSha256 + " " + got.Path + ")"}
			}
			if ok {
				updated.Add(1)
			} else {
				created.Add(1)
			}
			return nil
		})
	}
	err := g.Wait()
	res.Created, res.Updated, res.Unchanged = int(created.Load()), int(updated.Load()), int(unchanged.Load())
	return err
}

// ExportError is a memory that cannot be exported as it is.
type ExportError struct{ Path, Msg string }

func (e *ExportError) Error() string { return "memory " + e.Path + " " + e.Msg }
