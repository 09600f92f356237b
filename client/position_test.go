package client

import "testing"

// An older gateway could answer resumed for a turn it kept too little of and
// then close the watch lagging at the hole. From a position where a resume
// made no progress, the next watch takes live output only, whatever comes
// next is taken as it is, and output delivered since lifts that.
func TestPositionDoesNotAskAgainWhereAResumeMadeNoProgress(t *testing.T) {
	var p position
	p.resumed(false)
	p.advance(&PlannerOutput{Turn: "T1", Offset: 4, Type: OutputText})
	if turn, after, ok := p.resumeFrom(); !ok || turn != "T1" || after != 4 {
		t.Fatalf("resume from %q %d %v, want T1 4", turn, after, ok)
	}
	p.resumed(true)
	if turn, after, ok := p.resumeFrom(); ok {
		t.Fatalf("resume from %q %d after a resume that delivered nothing, want live output only", turn, after)
	}
	p.resumed(false)
	o := &PlannerOutput{Turn: "T1", Offset: 9, Type: OutputText}
	if v := p.check(o); v != deliverOutput {
		t.Fatalf("the first live output after it: %v, want delivered", v)
	}
	p.advance(o)
	if turn, after, ok := p.resumeFrom(); !ok || turn != "T1" || after != 9 {
		t.Fatalf("resume from %q %d %v after a delivery, want T1 9", turn, after, ok)
	}
}
