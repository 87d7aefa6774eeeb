package gitmem

// Operator is who operator commands are attributed to when they name no
// one: Options.Operator, by default the git identity (user.name and
// user.email) of the repository, else of the user. Callers that commit on
// an operator's behalf through Update (the stores package's metadata
// commits) use it as Meta.Author. The git identity is read at the first
// call, not at Open.
func (r *Repo) Operator() Signature { return r.opt.operator() }
