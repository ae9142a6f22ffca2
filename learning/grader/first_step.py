"""Where the learner's computation first parts from the reference's: the first named step whose
value differs, found by comparing two recordings of the same case (learning.grader.named_steps).

Runs in the grader's process. The reference's events are walked in order, and each is matched
with the learner's next event of the same name: the k-th value the learner's ``m`` took against
the k-th the reference's took. A match counts only while the two run in step (the learner's
event no more than a round of steps ahead of where the walk stands), so that the place the
reference's loops give (query row 0, keys 2 to 3) is the learner's too; in a kernel, both events
must also come from the same program. Where the learner did not set a name that the reference
sets, the learner's value is what it last held. The first disagreement is said as observed,
with the values; when the two cannot be kept in step, nothing is said.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from learning.grader import named_steps
from learning.grader.named_steps import Event, Recording
from learning.grader.numbers import close, counted
from learning.grader.tensors import PADDING_VALUE

SHOWN_WHOLE = 4  # a value of at most this many numbers is shown whole
# A learner's recording with this many times the reference's events takes finer steps than
# the lesson's (one key at a time where the lesson takes a block): its values are not the
# lesson's steps, and nothing is said.
FINER = 1.5


class _NotSet:
    pass


NOT_SET = _NotSet()


def merged(events: list[Event]) -> list[Event]:
    """Consecutive events of one name as one, holding the last value and the first place;
    not across rounds of a loop they share where they are two statements (the end of one
    query's loop and the start of the next: two steps, as ``named_steps`` records them)."""
    out: list[Event] = []
    last_loops: dict = {}
    for event in events:
        if out and out[-1].name == event.name and (
                out[-1].last_line == event.line or named_steps.one_round(last_loops,
                                                                         event.loops)):
            out[-1] = Event(event.name, event.value, out[-1].loops, out[-1].line,
                            out[-1].parts + event.parts, last=event.last_line)
        else:
            out.append(event)
        last_loops = event.loops
    return out


def first_difference(reference: Recording, learner: Recording, names: tuple[str, ...],
                     where: Callable[[dict, tuple], str] | None, args: tuple, atol: float,
                     rtol: float, facts: dict | None = None,
                     also_right: dict | None = None, feeds: dict | None = None) -> str:
    """One or two sentences on the first named step whose value differs ("" when nothing can
    honestly be said: no name in common, a recording cut or missing, the two out of step).
    Where something is said, ``facts`` (when given) receives it as data: "matched", the steps
    that matched before, and "differs", the first that did not ("" when every one did).
    ``also_right`` ({name: function of the reference's values so far}) gives a step another
    value that matches too (``Steps.also_right``). A step that is the reference's times
    log2(e) matches as well: scores kept in base 2, for exp2, as lessons 08 and 13 show, and
    the sentence says which steps were taken so. ``feeds`` ({name: later names}) lets a step
    that differs pass as the learner's own value where the steps the reference computes from
    it match (``Steps.feeds``), said too."""
    base_two: list[str] = []
    own: dict[str, tuple[str, ...]] = {}  # steps of the learner's own: the steps that matched
    said = _first_difference(reference, learner, names, where, args, atol, rtol, facts,
                             also_right, base_two, feeds or {}, own)
    if said and base_two:
        are = "is" if len(base_two) == 1 else "are"
        said += (f" ({_joined(base_two)} {are} the reference's times log2(e) = 1.4427, in "
                 "base 2 for exp2: taken as right)")
    if said and own:
        for name, fed in own.items():
            said += (f" ({name} differs from the reference's, but {_joined(list(fed))}, "
                     f"which the lesson computes from {name}, match: your {name} holds a value "
                     "of your own)")
    return said


LOG2E = 1.4426950408889634  # log2(e): a natural-log value times this is the base-2 one


def _base_two(got, want, atol: float, rtol: float) -> bool:
    """Whether ``got`` is ``want`` times log2(e), ``want`` holding a finite value other than 0
    (zeros and infinities are their own times anything)."""
    b = _array(want)
    if b is None or not _finite_somewhere(b):
        return False
    return _agree(got, b * LOG2E, atol, rtol) is True


def _finite_somewhere(values) -> bool:
    import numpy as np

    finite = values[np.isfinite(values)]
    return bool((finite != 0).any())


def _first_difference(reference: Recording, learner: Recording, names: tuple[str, ...],
                      where: Callable[[dict, tuple], str] | None, args: tuple, atol: float,
                      rtol: float, facts: dict | None, also_right: dict | None,
                      base_two: list[str], feeds: dict, own: dict) -> str:
    facts = {} if facts is None else facts
    if reference is None or learner is None or reference.problem or learner.problem:
        return ""
    if reference.raised:
        # the reference solution never raises on a case: where it did (Triton 3.6's
        # interpreter with numpy 2.4, say), its steps are no yardstick
        return ""
    common = [n for n in names if n in reference.names and n in learner.names]
    if not common:
        return ""
    ours = merged([e for e in reference.events if e.name in common])
    theirs = merged([e for e in learner.events if e.name in common])
    if not theirs and not learner.raised:
        # the traced function never ran (the learner launched a kernel of another name, and
        # left the lesson's one unused): its names were never theirs to set
        return ""
    window = len(common) + 1
    if len(ours) < 2 and ours and ours[0].name == reference.events[-1].name or \
            len(theirs) > FINER * len(ours) + window:
        # the last step alone (the output, built in place) only repeats the output; steps
        # finer than the lesson's (a key at a time, say) are not comparable
        return ""
    positions = {n: [j for j, e in enumerate(theirs) if e.name == n] for n in common}
    taken = dict.fromkeys(common, 0)
    consumed: set[int] = set()
    state: dict[str, object] = {}  # what each name holds in the learner's code, as walked
    held: dict[str, object] = {}  # and in the reference's
    matched: list[str] = []
    at = -1  # the learner's furthest event matched so far
    # a step of the learner's own that the next step did not show wrong: (its name, its
    # program, what would be said of it, the steps matched before it)
    pending = None

    def first_wrong(name: str, program, said: str) -> str:
        """``said`` of the step ``name`` that differs, or what was kept of a step of the
        learner's own under that name, in that program, that went before it."""
        if pending is not None and pending[0] == name and pending[1] == program:
            facts.update(matched=pending[3], differs=name)
            return pending[2]
        return said

    finished: set = set()  # the programs the reference's walk has left
    for i, event in enumerate(ours):
        name = event.name
        found = positions[name]
        k = taken[name]
        program = event.loops.get("program")
        if i and ours[i - 1].loops.get("program") != program:
            finished.add(ours[i - 1].loops.get("program"))
        while k < len(found) and theirs[found[k]].loops.get("program") in finished - {program}:
            # the learner's last steps of a program the reference has left, under a name the
            # reference set there before (s = the row's sum as the program ends): its own
            consumed.add(found[k])
            k += 1
        while k + 1 < len(found) and _building(theirs[found[k]].value, event.value, atol,
                                               rtol):
            state[name] = theirs[found[k]].value  # a list still being filled: not yet a step
            consumed.add(found[k])
            k += 1
        p = found[k] if k < len(found) else None
        near = p is not None and _pending(at, p, consumed, window) < window
        place = _place(where, event, args)
        if near:
            extra = _extra_steps(ours, i, theirs, positions, consumed, at, p, window, held,
                                 atol, rtol)
            if extra is not None:
                other, now, before, q = extra
                if before is NOT_SET:
                    return ""
                where_ = f" {place}" if place else ""
                # the reference's value of that step is the one it has not yet replaced, not
                # the answer: "expected" would read as the answer
                # a name that matched already and is set again (y = y.to(tl.float32)): its
                # new value is the one that differs, not the one said to match
                again, new = (" again", "new ") if other in matched else ("", "")
                said = f"{_before(matched, place)}where the reference goes on to set " \
                       f"{name}{where_}, your code sets {other}{again} first: its {new}" \
                       f"{other} " \
                       f"{_compared(now, before, atol, rtol, 'where the reference still holds')}"
                if theirs[q].loops.get("program") == event.loops.get("program") and not (
                        _same_iteration(event, theirs[p]) and
                        _agree(theirs[p].value, event.value, atol, rtol) is True):
                    facts.update(matched=tuple(matched), differs=other)
                    return said
                # this step agrees all the same, or is another program's: the other may be a
                # value of the learner's own under a name the reference uses too (dy = dy -
                # dot before dx = y * dy; acc divided by l as a program ends). Said only if
                # that name is the next to differ, in its program: then it went wrong there
                pending = (other, theirs[q].loops.get("program"), said, tuple(matched))
                consumed.add(q)  # walked past: the name's next step is the one after it
                state[other] = now
                while taken[other] < len(positions[other]) and \
                        positions[other][taken[other]] <= q:
                    taken[other] += 1
            if learner.raised and p == len(theirs) - 1 and theirs[p].parts < event.parts:
                # the learner's last step, cut short by the error: not the whole of it
                facts.update(matched=tuple(matched), differs=name)
                return f"{_then(matched)}your code raised {learner.raised}, " \
                       f"before it finished {name}{' ' + place if place else ''}"
            if not _same_iteration(event, theirs[p]):
                return ""  # another program's step, or another iteration of a loop
            got = theirs[p].value
            taken[name] = k + 1
            consumed.add(p)
            at = max(at, p)
            state[name] = got
            verdict = _agree(got, event.value, atol, rtol)
            if verdict is False and name in (also_right or {}):
                verdict = _agree(got, _other_value(also_right[name], held, name, event.value),
                                 atol, rtol) or False
            if verdict is False and _base_two(got, event.value, atol, rtol):
                verdict = True
                base_two.extend([name] if name not in base_two else [])
            if verdict is None or verdict is False and "program" in event.loops \
                    and _array(got).shape != _array(event.value).shape:
                return ""  # a kernel's blocks of another shape: another tiling, not a step
            if not verdict and _fed_steps_agree(
                    feeds.get(name, ()), event, ours[i + 1:], theirs, positions, taken, atol,
                    rtol):
                own[name] = tuple(feeds[name])
                held[name] = event.value
                continue
            if not verdict:
                facts.update(matched=tuple(matched), differs=name)
                return first_wrong(name, event.loops.get("program"), _differs(
                    name, place, got, event.value, matched, atol, rtol))
        elif learner.raised and all(j in consumed for j in range(at + 1, len(theirs))):
            # said from the last step it did take: the error came after that one, wherever
            # the reference's next step would have been
            last = theirs[at] if at >= 0 else None
            after = f" after {last.name}" if last is not None else ""
            last_place = _place(where, last, args) if last is not None else ""
            facts.update(matched=tuple(matched), differs=name)
            return f"{_then(matched)}your code raised {learner.raised}{after}" \
                   f"{' ' + last_place if last_place and after else ''}, and never set " \
                   f"{name}{' ' + place if place else ''}"
        else:
            current = state.get(name, NOT_SET)
            verdict = None if current is NOT_SET else _agree(current, event.value, atol, rtol)
            if verdict is False and _base_two(current, event.value, atol, rtol):
                verdict = True
                base_two.extend([name] if name not in base_two else [])
            if verdict is None and current is not NOT_SET:
                return ""
            if not verdict:
                facts.update(matched=tuple(matched), differs=name)
                program = event.loops.get("program")
                if place and program is not None and not any(
                        e.loops.get("program") == program for e in learner.events):
                    # no step of that program at all: it never ran, and what the name holds
                    # is another program's
                    return first_wrong(name, program, f"{_before(matched, place)}nothing of "
                                       f"your code ran {place}, where the reference sets "
                                       f"{name}: your launch ran no such program")
                return first_wrong(name, program, _not_set(
                    name, place, current, event.value, matched, atol, rtol))
        held[name] = event.value
        if name not in matched:
            matched.append(name)
    if reference.cut or learner.cut or not matched or len(consumed) < len(theirs):
        return ""  # steps of the learner's own that the reference does not take: unsaid
    facts.update(matched=tuple(matched), differs="")
    return f"every named step matches the reference's ({_joined(matched)}): what differs " \
           "comes after the last of them"


def _other_value(right, held: dict, name: str, value):
    """The value ``right`` gives for step ``name`` from the reference's values so far (this
    step's own included), or NOT_SET where it cannot."""
    try:
        return right({**held, name: value})
    except Exception:  # noqa: BLE001 - a value it cannot give matches nothing
        return NOT_SET


def _pending(at: int, p: int, consumed: set[int], limit: int) -> int:
    """The learner's events between the walk's furthest match and ``p`` not matched yet,
    counted up to ``limit`` (a walk of n events then costs n times the window, not n**2)."""
    count = 0
    for j in range(at + 1, p):
        if j not in consumed:
            count += 1
            if count >= limit:
                break
    return count


def _extra_steps(ours, i, theirs, positions, consumed, at, p, window, held, atol, rtol):
    """A step the learner's code took before ``theirs[p]`` that the reference does not take
    there: (its name, the learner's value, the reference's, its place in ``theirs``), or
    None. A step the reference
    takes in the same iteration a little later is the same step in another order, and one
    that leaves the value as the reference holds it changes nothing."""
    for q in range(at + 1, p):
        other = theirs[q].name
        if q in consumed or other == ours[i].name:
            continue
        if any(ours[j].name == other and _within(ours[j], ours[i])
               and _same_iteration(ours[j], theirs[q])
               for j in range(i + 1, min(i + window, len(ours)))):
            continue
        now = theirs[positions[other][bisect.bisect_left(positions[other], p) - 1]].value
        before = held.get(other, NOT_SET)
        if before is NOT_SET or _agree(now, before, atol, rtol) is not True:
            return other, now, before, q
    return None


def _within(inner: Event, outer: Event) -> bool:
    """``inner`` ran in ``outer``'s iteration: every loop of ``outer`` at the same value (and
    perhaps in loops of its own, nested deeper: the tile's K loop inside the tile)."""
    return all(inner.loops.get(name, NOT_SET) == value for name, value in outer.loops.items())


def _fed_steps_agree(fed: tuple[str, ...], event: Event, after: list[Event], theirs: list[Event],
                     positions: dict, taken: dict, atol: float, rtol: float) -> bool:
    """Whether every step in ``fed`` (those the reference computes from ``event``'s) is next
    set, by the reference and by the learner, in ``event``'s place, to values that agree."""
    if not fed:
        return False
    for name in fed:
        ours = next((e for e in after if e.name == name), None)
        found = positions.get(name, [])
        k = taken.get(name, 0)
        if ours is None or k >= len(found) or not _same_iteration(ours, event):
            return False
        theirs_ = theirs[found[k]]
        if not _same_iteration(ours, theirs_) or \
                _agree(theirs_.value, ours.value, atol, rtol) is not True:
            return False
    return True


def _same_iteration(ours: Event, theirs: Event) -> bool:
    """Both steps ran in the same program (a kernel's; plain functions have none), and every
    loop variable the two share by name holds the same value (blocks visited in another order
    are not in step, whatever the count of steps says)."""
    if ours.loops.get("program") != theirs.loops.get("program"):
        return False
    return all(theirs.loops[name] == value for name, value in ours.loops.items()
               if name in theirs.loops)


def _place(where, event: Event, args) -> str:
    if where is None:
        return ""
    try:
        return where(event.loops, args) or ""
    except Exception:  # noqa: BLE001 - a place the words cannot give is left out
        return ""


def _array(value):
    import numpy as np

    if isinstance(value, str):
        return None
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        return None


def _agree(got, want, atol: float, rtol: float) -> bool | None:
    """Whether two recorded values agree within the tolerance (None: they cannot be compared,
    one of them was not kept)."""
    a, b = _array(got), _array(want)
    if a is None or b is None:
        return None
    return a.shape == b.shape and bool(close(a, b, atol, rtol).all())


def _building(got, want, atol: float, rtol: float) -> bool:
    """A list shorter than the reference's that agrees with its start: still being filled
    (shifted.append(...) in a loop that also fills another named list)."""
    a, b = _array(got), _array(want)
    if a is None or b is None or a.ndim == 0 or b.ndim == 0 or a.shape[1:] != b.shape[1:]:
        return False
    return a.shape[0] < b.shape[0] and bool(close(a, b[:a.shape[0]], atol, rtol).all())


def _before(matched: list[str], place: str) -> str:
    if not matched:
        return ""
    verb = "matches" if len(matched) == 1 else "match"
    return f"{_joined(matched)} {verb} the reference's{' until then' if place else ''}; "


def _then(matched: list[str]) -> str:
    """What comes before "your code raised": the steps that matched until then (in earlier
    programs or rounds, perhaps: "until then", not "and then", which would contradict the
    "never set" after it), or nothing, where the error came before any step."""
    return _before(matched, "until then")


def _differs(name: str, place: str, got, want, matched: list[str], atol: float,
             rtol: float) -> str:
    where = f" {place}" if place else ""
    return f"{_before(matched, place)}{name}{where} {_compared(got, want, atol, rtol)}"


def _not_set(name: str, place: str, current, want, matched: list[str], atol: float,
             rtol: float) -> str:
    where = f" {place}" if place else ""
    if current is NOT_SET:
        return f"{_before(matched, place)}the reference sets {name}{where} to " \
               f"{_shown(want, 6, atol, rtol)}; your code had not set it yet"
    # "its m is 6" after "does not set m" read as a contradiction: the value is the one left
    return f"{_before(matched, place)}your code does not set {name}{where}, where the " \
           f"reference does: the {name} it holds from before " \
           f"{_compared(current, want, atol, rtol)}"


def _compared(got, want, atol: float, rtol: float, expected: str = "expected") -> str:
    """'is 2.5031, expected 1.5032', or for a large value where and how much it differs
    (``expected``: the words before the reference's value)."""
    import numpy as np

    a, b = _array(got), _array(want)
    if a.shape != b.shape:
        return f"is {_shape_words(a)}, {expected} {_shape_words(b)}"
    if a.size <= SHOWN_WHOLE and a.ndim <= 1:
        digits = _digits(a, b)
        return f"is {_shown(got, digits, atol, rtol)}, {expected} " \
               f"{_shown(want, digits, atol, rtol)}" + \
            _padding_read(a[~close(a, b, atol, rtol)])
    bad = ~close(a, b, atol, rtol)
    index = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else (0,) * a.ndim
    digits = _digits(a[index], b[index])
    at = "[" + "][".join(str(i) for i in index) + "]"
    return f"differs at {at}: {_faithful(float(a[index]), digits, atol, rtol)}, {expected} " \
           f"{_faithful(float(b[index]), digits, atol, rtol)} ({int(bad.sum())} of {a.size} " \
           "values differ)" \
           + _padding_read(a[index])


def _padding_read(values) -> str:
    """Where a value that differs is the check's padding value, what that value is: a number
    the learner never wrote, read where no row of a strided input lies."""
    import numpy as np

    if not np.any(np.asarray(values, dtype=np.float64) == PADDING_VALUE):
        return ""
    return f" ({_number(PADDING_VALUE)} is what the check stores between the rows of a " \
        "strided input: a read where no row lies, a row stride taken from the width, say)"


def _shape_words(array) -> str:
    if array.ndim == 0:
        return "a single number"
    if array.ndim == 1:
        return f"a list of {counted(array.shape[0], 'number')}"
    return "a " + " x ".join(str(n) for n in array.shape) + " array"


def _digits(a, b) -> int:
    """Significant digits enough to print every pair of values that differ apart (6 at least):
    a list rounded to six places beside the reference's shows each pair differing, not only
    the first."""
    import numpy as np

    a, b = np.ravel(a), np.ravel(b)
    differ = [(float(x), float(y)) for x, y in zip(a, b) if x != y and not (x != x and y != y)]
    for digits in range(6, 18):
        if all(_number(x, digits) != _number(y, digits) for x, y in differ):
            return digits
    return 17


def _number(value: float, digits: int = 6) -> str:
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"


def _faithful(value: float, digits: int, atol: float | None = None, rtol: float = 0.0) -> str:
    """``value`` to ``digits`` significant digits, or more where the zeros left off the end
    hide a digit farther out than the check tolerates: 0.62500005 printed as 0.625 reads as a
    reference without eps."""
    import numpy as np

    shown = _number(value, digits)
    while atol is not None and digits < 17 and value == value and \
            abs(value) != float("inf") and _significant(shown) < digits and \
            not close(np.float64(float(shown)), np.float64(value), atol, rtol):
        digits += 1
        shown = _number(value, digits)
    return shown


def _significant(shown: str) -> int:
    """The significant digits a number printed by ``_number`` shows ("0.625": 3)."""
    mantissa = shown.split("e")[0].lstrip("-").replace(".", "")
    return len(mantissa.lstrip("0"))


def _shown(value, digits: int = 6, atol: float | None = None, rtol: float = 0.0) -> str:
    array = _array(value)
    if array is None:
        return str(value)
    if array.ndim == 0:
        return _faithful(float(array), digits, atol, rtol)
    flat = array.ravel()
    if array.ndim == 1 and flat.size <= SHOWN_WHOLE:
        return "[" + ", ".join(_faithful(float(v), digits, atol, rtol) for v in flat) + "]"
    return _shape_words(array)


def _joined(names: list[str]) -> str:
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"
