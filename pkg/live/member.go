package live

import (
	"fmt"
	"strings"
)

// ChooseMember picks the member a scan reads from among members
// (MemberStatuses): the one whose name or endpoint is want, or, when want
// is "", the first follower (by name) that answered its Status and is
// not a learner, so that the scan's serializable Ranges load a member the
// writes do not wait on; a cluster without such a follower (one member,
// or every follower silent) is read from its leader. It returns
// ErrUnknownMember, wrapped with the members' names and endpoints, when
// no member is want, and an error naming the member when the one wanted
// did not answer.
func ChooseMember(members []MemberStatus, want string) (MemberStatus, error) {
	if want == "" {
		var leader *MemberStatus
		for i, m := range members {
			switch {
			case m.Error != "":
			case m.IsLeader:
				leader = &members[i]
			case !m.IsLearner:
				return m, nil
			}
		}
		if leader != nil {
			return *leader, nil
		}
		return MemberStatus{}, fmt.Errorf("%w: no member answered its Status", ErrUnknownMember)
	}
	var known []string
	for _, m := range members {
		if m.Name == want || m.Endpoint == want || m.MemberID == want {
			if m.Error != "" {
				return MemberStatus{}, fmt.Errorf("member %s (%s) did not answer: %s", m.Name, m.Endpoint, m.Error)
			}
			return m, nil
		}
		known = append(known, fmt.Sprintf("%s (%s)", m.Name, m.Endpoint))
	}
	return MemberStatus{}, fmt.Errorf("%q: %w: the members are %s", want, ErrUnknownMember, strings.Join(known, ", "))
}
