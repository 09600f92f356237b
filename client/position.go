package client

// position is where a planner watch is in its session's output, and the one
// place that decides what to do with an output that arrives. Outputs are
// numbered per turn (turn, offset 1, 2, 3, …) and a turn starts only after
// the previous one's done, so the next output is either the next offset of
// the same turn or, once that turn has ended, offset 1 of another. Anything
// else is an output delivered already (dropped) or one after a hole (a gap:
// the watch is established again from the position, and the server replays
// what is missing). The watch's mutex guards it.
type position struct {
	turn   string // of the last output delivered; "" before any
	offset int64  // its offset
	ended  bool   // that output was the turn's done
	prev   string // the turn before turn, which has ended
	// synced: every output after the position is expected, so a jump is a
	// gap. False at the start of a watch that takes live output only, and
	// after the server could not resume: the next output is taken as it is.
	synced bool
	// next is a turn whose start was missed after turn ended: the watch
	// resumes it from its start.
	next string
	// tried: the server resumed from here and nothing was delivered since.
	// The gateway answers resumed: false when it cannot replay every output
	// after the position, but an older one could answer resumed for a turn
	// it kept too little of and then find the hole itself (a lagging close);
	// asking such a server again would go round in a loop, so the next watch
	// takes live output only.
	tried bool
}

// verdict is what to do with an output.
type verdict int

const (
	deliverOutput verdict = iota // the next output: hand it over
	dropOutput                   // delivered already
	gapOutput                    // outputs before it are missing
)

// check judges o against the position. An output without a turn comes from
// a server that does not number outputs; it is taken as it is.
func (p *position) check(o *PlannerOutput) verdict {
	switch {
	case o.Turn == "":
		return deliverOutput
	case o.Turn == p.turn:
		switch {
		case o.Offset <= p.offset:
			return dropOutput
		case o.Offset == p.offset+1 || !p.synced:
			return deliverOutput
		}
		return gapOutput
	case o.Turn == p.prev:
		return dropOutput
	case !p.synced:
		return deliverOutput
	case p.turn != "" && !p.ended:
		return gapOutput // the rest of p.turn, up to its done, is missing
	case o.Offset == 1:
		return deliverOutput
	}
	p.next = o.Turn
	return gapOutput
}

// advance records o as delivered.
func (p *position) advance(o *PlannerOutput) {
	if o.Turn == "" {
		return
	}
	if o.Turn != p.turn {
		p.prev = p.turn
	}
	p.turn, p.offset, p.ended = o.Turn, o.Offset, o.Type == OutputDone
	p.synced, p.next, p.tried = true, "", false
}

// resumeFrom is what to watch again with: the rest of an unfinished turn,
// a turn whose start was missed, or else the running turn from its start
// (turn "", after 0), which a turn that began meanwhile needs. ok is false
// after a resume that made no progress: watch for live output only.
func (p *position) resumeFrom() (turn string, after int64, ok bool) {
	switch {
	case p.tried:
		return "", 0, false
	case p.turn != "" && !p.ended:
		return p.turn, p.offset, true
	case p.next != "":
		return p.next, 0, true
	}
	return "", 0, true
}

// resumed records the server's answer to a watch that asked to resume:
// from a server that could not (or does not resume at all) the next output
// is taken as it is.
func (p *position) resumed(ok bool) {
	p.synced, p.next, p.tried = ok, "", ok
}
