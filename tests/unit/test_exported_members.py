import types

import slotline


def test_all_is_sorted_and_names_every_public_member() -> None:
    assert slotline.__all__ == sorted(slotline.__all__)
    # Some are imported on first use: use each, then nothing else may be public.
    for name in slotline.__all__:
        assert hasattr(slotline, name)
    public = {
        name
        for name, value in vars(slotline).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name != "annotations"
    }
    assert public == set(slotline.__all__) - {"__version__"}


def test_the_http_client_is_where_the_docs_import_it_from() -> None:
    from slotline.client import SlotlineClient
    from slotline.client.http import SlotlineClient as defined

    assert SlotlineClient is defined
