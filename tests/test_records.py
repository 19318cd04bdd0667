"""Match records: capture() nesting, history, last_compile."""

from fusion_passes import records


def test_nested_captures_each_collect_their_records():
    with records.capture() as outer:
        with records.capture() as inner:
            a = records.new_record(("x",))
        b = records.new_record(("x",))
    assert inner == [a] and outer == [a, b]
    assert records.last_compile() is b and records.history()[-2:] == [a, b]


def test_record_ids_are_unique_and_increasing():
    a, b = records.new_record(()), records.new_record(())
    assert b.graph_id > a.graph_id
    assert not a.passes_ran and a.matches_for("anything") == []


def test_discarded_record_leaves_history_and_captures():
    with records.capture() as got:
        a = records.new_record(())
        b = records.new_record(())
        records.discard(a)
    assert got == [b] and a not in records.history()
