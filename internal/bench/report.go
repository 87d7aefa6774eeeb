package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured.
type Report struct {
	cfg     Config
	Started time.Time
	Took    time.Duration
	Machine Machine
	Floor   floor
	Single  []*run
	Conc    []*conc
	// MemoryStores is the Memory Stores API's measurements (nil: not run).
	MemoryStores *msResult
	// Hist is the restart and the history commands as fresh processes,
	// each with its peer (none: not run).
	Hist []*histRow
	// Stores is the many-stores measurements (nil: not run).
	Stores *storesResult
	// Sync is push and pull of many commits, each with the git CLI's.
	Sync []*histRow
	// Merge is the calls made during a sync's merges and without (nil:
	// not run).
	Merge *mergeResult
}

// Machine describes where the run happened.
type Machine struct {
	CPU, Kernel, FS, Go, Git, Node, SDK string
	Cores                               int
	MemGiB                              int
	LoadStart, LoadEnd                  string
}

func readMachine(dir, sdkDir string) Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), FS: fsType(dir), LoadStart: loadAverage()}
	m.CPU = firstField("/proc/cpuinfo", "model name")
	if kb := firstField("/proc/meminfo", "MemTotal"); kb != "" {
		var n int
		fmt.Sscanf(kb, "%d", &n)
		m.MemGiB = int(math.Round(float64(n) / (1 << 20)))
	}
	if out, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(out))
	}
	m.Git = commandVersion("git", "--version")
	if sdkDir != "" {
		m.Node = commandVersion("node", "--version")
		var pkg struct{ Version string }
		data, _ := os.ReadFile(filepath.Join(sdkDir, "node_modules", "@anthropic-ai", "sdk", "package.json"))
		if json.Unmarshal(data, &pkg) == nil {
			m.SDK = "@anthropic-ai/sdk " + pkg.Version
		}
	}
	return m
}

func firstField(file, key string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func commandVersion(name string, args ...string) string {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// loadAverage is the 1, 5 and 15 minute load averages.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ms formats a duration in milliseconds with about three significant digits.
func ms(d time.Duration) string {
	if d == 0 {
		return "–"
	}
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f ms", v)
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 || math.IsNaN(a/b) {
		return "–"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// table is a header and rows, shown as aligned text or as markdown.
type table struct {
	title  string
	header []string
	rows   [][]string
}

func (t table) text(w io.Writer) {
	fmt.Fprintf(w, "\n%s\n", t.title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	tw.Flush()
}

func (t table) markdown(w io.Writer) {
	fmt.Fprintf(w, "\n**%s**\n\n| %s |\n|", t.title, strings.Join(t.header, " | "))
	for i := range t.header {
		if i == 0 {
			fmt.Fprint(w, "---|")
		} else {
			fmt.Fprint(w, "--:|")
		}
	}
	fmt.Fprintln(w)
	for _, r := range t.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

func (rep *Report) find(name string, files int) *run {
	for _, r := range rep.Single {
		if r.name == name && r.files == files {
			return r
		}
	}
	return nil
}

func (rep *Report) tables() []table {
	cfg := rep.cfg
	var out []table
	if len(rep.Single) > 0 {
		out = rep.singleTables()
	}
	if len(rep.Conc) > 0 {
		ct := table{title: fmt.Sprintf("Concurrent clients over HTTP, %s files: mutations only, each client on its own files", count(cfg.ConcFiles)),
			header: []string{"clients", "gitmem p50", "p99", "p99 in the server", "mutations/s", "sustained", "TS p50", "p99", "p99 in the server", "mutations/s", "sustained", "gitmem vs TS (sustained)"}}
		for _, clients := range cfg.Clients {
			row := []string{fmt.Sprint(clients)}
			var rates [2]float64
			for i, name := range []string{GitmemHTTP, TS} {
				c := rep.conc(name, clients)
				if c == nil {
					row = append(row, "–", "–", "–", "–", "–")
					continue
				}
				rates[i] = c.sustained()
				row = append(row, ms(pct(c.lat, 50)), ms(pct(c.lat, 99)), c.serverP99(), fmt.Sprintf("%.0f", c.rate()), fmt.Sprintf("%.0f", c.sustained()))
			}
			ct.rows = append(ct.rows, append(row, ratio(rates[0], rates[1])))
		}
		out = append(out, ct)
	}
	if len(rep.Hist) > 0 {
		out = append(out, rep.histTable())
	}
	if len(rep.Sync) > 0 {
		out = append(out, rep.syncTable())
	}
	if rep.Merge != nil {
		out = append(out, rep.mergeTable())
	}
	if rep.Stores != nil {
		out = append(out, rep.storesTable())
	}
	if rep.MemoryStores != nil {
		out = append(out, rep.msTable())
	}
	fl := rep.Floor
	out = append(out, table{title: "The floor: one 200-byte write and sync",
		header: []string{"sync", "p50", "p99"},
		rows: [][]string{
			{"append + fsync", ms(pct(fl.fsync, 50)), ms(pct(fl.fsync, 99))},
			{"append + fdatasync", ms(pct(fl.fdatasync, 50)), ms(pct(fl.fdatasync, 99))},
			{"overwrite of preallocated zeros + fdatasync (gitmem's log)", ms(pct(fl.prealloc, 50)), ms(pct(fl.prealloc, 99))},
		}})
	return out
}

func (rep *Report) conc(name string, clients int) *conc {
	for _, c := range rep.Conc {
		if c.name == name && c.clients == clients {
			return c
		}
	}
	return nil
}

func (m Machine) describe() string {
	parts := []string{fmt.Sprintf("%d × %s", m.Cores, m.CPU), fmt.Sprintf("%d GiB", m.MemGiB), m.Kernel, m.FS, m.Go, m.Git}
	if m.Node != "" {
		parts = append(parts, "node "+m.Node, m.SDK)
	}
	var keep []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ", ")
}

// Text writes the report as aligned tables.
func (rep *Report) Text(w io.Writer) {
	fmt.Fprintf(w, "\nMachine: %s\nLoad average (1, 5, 15 min): %s at the start, %s at the end; the run took %s\n",
		rep.Machine.describe(), rep.Machine.LoadStart, rep.Machine.LoadEnd, rep.Took.Round(time.Second))
	for _, t := range rep.tables() {
		t.text(w)
	}
}

// Markdown writes the report as markdown tables, for docs/performance.md.
func (rep *Report) Markdown(w io.Writer, command string) {
	fmt.Fprintf(w, "Measured %s on %s. Load average (1, 5, 15 min) %s at the start, %s at the end; the run took %s.\n\n    %s\n",
		rep.Started.UTC().Format("2006-01-02"), rep.Machine.describe(), rep.Machine.LoadStart, rep.Machine.LoadEnd,
		rep.Took.Round(time.Second), command)
	for _, t := range rep.tables() {
		t.markdown(w)
	}
}

// singleTables are the one-client tables.
func (rep *Report) singleTables() []table {
	cfg := rep.cfg
	var out []table
	one := table{title: fmt.Sprintf("One client: the mix of create, str_replace, insert, view, rename and delete, %s commits of history", count(cfg.History)),
		header: []string{"backend", "files", "calls", "mutation p50", "p99", "view p50", "calls/s", "p50 vs TS", fmt.Sprintf("first start, median of %d [min–max]", firstStarts)}}
	for _, files := range cfg.Files {
		ts := rep.find(TS, files)
		for _, name := range AllBackends {
			r := rep.find(name, files)
			if r == nil {
				continue
			}
			vs := "–"
			if ts != nil {
				vs = ratio(float64(pct(r.mutations(), 50)), float64(pct(ts.mutations(), 50)))
			}
			start := "–"
			if name != GitCLI && name != GoGit {
				start = span(r.starts)
			}
			one.rows = append(one.rows, []string{titles[name], count(files), count(r.mix.calls), ms(pct(r.mutations(), 50)),
				ms(pct(r.mutations(), 99)), ms(pct(r.mix.byCmd["view"], 50)), fmt.Sprintf("%.0f", float64(r.mix.calls)/r.mix.busy.Seconds()), vs, start})
		}
	}
	out = append(out, one)
	largest := slices.Max(cfg.Files)
	per := table{title: fmt.Sprintf("p50 per command at %s files", count(largest)), header: []string{"command"}}
	var names []string
	for _, name := range AllBackends {
		if rep.find(name, largest) != nil {
			names = append(names, name)
			per.header = append(per.header, titles[name])
		}
	}
	for _, cmd := range Commands {
		row := []string{cmd}
		for _, name := range names {
			row = append(row, ms(pct(rep.find(name, largest).mix.byCmd[cmd], 50)))
		}
		per.rows = append(per.rows, row)
	}
	out = append(out, per)
	if cfg.MoveOps > 0 {
		moves := table{title: fmt.Sprintf("rename and delete at %s files on their own: %d calls of each per backend (a create before each rename, not timed), in blocks alternated",
			count(largest), cfg.MoveOps), header: []string{"backend", "rename p50", "delete p50", "rename vs TS", "delete vs TS"}}
		ts := rep.find(TS, largest)
		for _, name := range names {
			r := rep.find(name, largest)
			row := []string{titles[name]}
			for _, cmd := range moveCommands {
				row = append(row, ms(pct(r.moves.byCmd[cmd], 50)))
			}
			for _, cmd := range moveCommands {
				vs := "–"
				if ts != nil {
					vs = ratio(float64(pct(r.moves.byCmd[cmd], 50)), float64(pct(ts.moves.byCmd[cmd], 50)))
				}
				row = append(row, vs)
			}
			moves.rows = append(moves.rows, row)
		}
		out = append(out, moves)
	}
	if smallest := slices.Min(cfg.Files); smallest != largest {
		grow := table{title: fmt.Sprintf("Growth: mutation p50 at %s files over %s files", count(largest), count(smallest)),
			header: []string{"backend", count(smallest) + " files", count(largest) + " files", "growth"}}
		for _, name := range names {
			a, b := rep.find(name, smallest), rep.find(name, largest)
			if a == nil {
				continue
			}
			pa, pb := pct(a.mutations(), 50), pct(b.mutations(), 50)
			grow.rows = append(grow.rows, []string{titles[name], ms(pa), ms(pb), ratio(float64(pb), float64(pa))})
		}
		out = append(out, grow)
	}
	return out
}
