"""moto's costs that grow with a run, cut without changing an answer: each patch makes
moto answer what it answered, in the same order, at a cost that no longer grows with a
table's audit trail or a queue's backlog (`install`, before moto's server starts)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from xml.sax.saxutils import escape, quoteattr


def install() -> None:
    """Every patch below, once a process (each checks it is not already in)."""
    _cheaper_transactions()
    _modules_listed_once()
    _handlers_listed_once()
    _queries_read_their_partition()
    _queue_counts_at_one_time()
    _attribute_names_converted_once()
    _attribute_keys_found_once()
    _user_agent_parts_cleaned_once()
    _members_picked_without_their_path()
    _xml_written_plainly()


def _cheaper_transactions() -> None:
    """moto's TransactWriteItems backs up every table it touches, whole (a deep copy), to
    restore it if the transaction fails: a cost that grows with the table, and nodescaler's
    state table gains an audit item each decision (TTL, which moto never applies, deletes
    them after 30 days), so a two-day run spent most of its time copying the audit trail.
    The same backup, made as a copy of the table sharing the items the transaction does not
    name (none of its operations can change another item) and a deep copy of those it does:
    a rollback restores exactly what moto's would. A table with a stream is copied whole,
    as moto does (its stream's records are rolled back too)."""
    from moto.dynamodb.models import DynamoDBBackend

    if getattr(DynamoDBBackend.transact_write_items, "backs_up_named_items", False):
        return
    whole = DynamoDBBackend.transact_write_items

    def transact_write_items(backend: Any, transact_items: list[dict[str, Any]]) -> None:
        named: dict[str, list[dict[str, Any]]] = {}
        for item in transact_items:
            op = next(iter(item.values()), None) if isinstance(item, dict) else None
            if not isinstance(op, dict) or op.get("TableName") not in backend.tables:
                return whole(backend, transact_items)  # moto's own answer (or error)
            named.setdefault(op["TableName"], []).append(op)
        tables = backend.tables
        if any(tables[name].stream_shard is not None for name in named):
            return whole(backend, transact_items)
        backups = {name: _backed_up(tables[name], ops) for name, ops in named.items()}
        return _without_deep_copies(backend, transact_items, backups, whole)

    transact_write_items.backs_up_named_items = True  # type: ignore[attr-defined]
    setattr(DynamoDBBackend, "transact_write_items", transact_write_items)  # noqa: B010


def _queries_read_their_partition() -> None:
    """moto answers a Query on a table's key by sorting every item of the table (its
    `all_items`) and keeping those of the partition asked for: a cost that grows with the
    table, which gains an audit item each decision. The items of a partition are those
    moto files under its hash key; read from there, then sorted by their range key as
    moto sorts what it kept: the same items in the same order. Queries of an index, or
    of a table without a range key, are moto's own."""
    from moto.dynamodb.models.table import Table

    if getattr(Table.query, "reads_the_partition", False):
        return
    whole = Table.query

    def query(table: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        by_index = kwargs.get("index_name") or (len(args) > 6 and args[6])
        if by_index or table.range_key_attr is None or hash_key is None:
            return whole(table, hash_key, *args, **kwargs)
        partition = table.items.get(hash_key, {})
        table.all_items = lambda: list(partition.values())  # this call's, then moto's again
        try:
            return whole(table, hash_key, *args, **kwargs)
        finally:
            del table.all_items

    query.reads_the_partition = True  # type: ignore[attr-defined]
    setattr(Table, "query", query)  # noqa: B010


def _queue_counts_at_one_time() -> None:
    """moto counts a queue's messages (GetQueueAttributes' ApproximateNumberOf...) reading
    the clock once a message, for each of its counts: most of a call's cost when a queue
    holds thousands (a burst's backlog, read at every look of the fast path). Each count
    made at one reading of the clock, with moto's own comparisons: what moto answers,
    up to which microsecond of the call each message is looked at."""
    from moto.core.utils import unix_time_millis
    from moto.sqs.models import Queue

    if getattr(getattr(Queue, "messages").fget, "counted_at_one_time", False):  # noqa: B009
        return

    def visible(queue: Any) -> list[Any]:
        now = unix_time_millis()
        return [m for m in queue._messages if now > m.visible_at and not now < m.delayed_until]

    def delayed(queue: Any) -> int:
        now = unix_time_millis()
        return sum(1 for m in queue._messages if now < m.delayed_until)

    def not_visible(queue: Any) -> int:
        now = unix_time_millis()
        return sum(1 for m in queue._messages if not now > m.visible_at)

    visible.counted_at_one_time = True  # type: ignore[attr-defined]
    for name, count in (
        ("messages", visible),
        ("approximate_number_of_messages_delayed", delayed),
        ("approximate_number_of_messages_not_visible", not_visible),
    ):
        setattr(Queue, name, property(count))


def _attribute_names_converted_once() -> None:
    """moto names each of a queue's attributes from its CamelCase name on every read of
    them (each message sent, received or validated): a pure function of the name,
    converted once a name."""
    from moto.sqs import models

    whole = getattr(models, "camelcase_to_underscores")  # noqa: B009  (moto's import)
    if hasattr(whole, "cache_info"):
        return
    setattr(models, "camelcase_to_underscores", lru_cache(maxsize=None)(whole))  # noqa: B010


_FOUND: dict[tuple[Any, ...], tuple[str, ...]] = {}  # `_attribute_keys_found_once`'s


def _keys_key(service: str | None, obj: Any, key: str, shape: Any) -> tuple[Any, ...]:
    """What the keys of a member depend on (`_attribute_keys_found_once`)."""
    parent = getattr(shape, "parent", None)
    return (
        service,
        type(obj),
        key,
        shape.name if shape is not None else None,
        parent.name if parent is not None else None,
    )


def _attribute_keys_found_once() -> None:
    """moto's serializer finds where each member of an answer lies on the object answered
    (its name, its snake_case form, aliases from the shape, its parent's and the object's
    class) by asking six alias providers, for every member of every object of every
    answer: most of a DescribeAutoScalingGroups of 40 instances. Their answer depends only
    on the service, the object's class (its `Meta`), the member's name and its shape and
    parent shape (by name: a service names each of its shapes once), so it is kept for
    them: the same keys, tried in the same order. An object with a `Meta` of its own, or
    a picker with other providers, is moto's own."""
    from moto.core import serialize

    picker = serialize.XFormedAttributePicker
    whole = picker.get_possible_keys
    if getattr(whole, "found_once", False):
        return

    def get_possible_keys(self: Any, context: Any) -> Any:
        obj, shape = context.obj, context.shape
        own_meta = "Meta" in getattr(obj, "__dict__", ())
        if own_meta or self.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS:
            return whole(self, context)
        service = context.service_model
        key = _keys_key(
            service.service_name if service is not None else None, obj, context.key, shape
        )
        keys = _FOUND.get(key)
        if keys is None:
            keys = _FOUND[key] = tuple(whole(self, context))
        return keys

    get_possible_keys.found_once = True  # type: ignore[attr-defined]
    # moto's own, kept for a test
    get_possible_keys.whole = whole  # type: ignore[attr-defined]
    setattr(picker, "get_possible_keys", get_possible_keys)  # noqa: B010


def _user_agent_parts_cleaned_once() -> None:
    """botocore's, on the clients' side of each request: it builds the User-Agent header
    twice a request from some twenty parts, each cleaned character by character of what a
    header may not carry. A pure function of the part and one flag, and the parts are the
    same few strings request after request: cleaned once each (a bounded cache)."""
    from botocore import useragent

    whole = useragent.sanitize_user_agent_string_component
    if hasattr(whole, "cache_info"):
        return
    setattr(  # noqa: B010  (botocore's module global, read by name at each call)
        useragent, "sanitize_user_agent_string_component", lru_cache(maxsize=1024)(whole)
    )


def _members_picked_without_their_path() -> None:
    """moto's serializer finds each member of an answer through its value picker, handing
    it the member's path in the answer (a string joined afresh for every member of every
    object) which the picker reads only to apply a response transformer. With none
    (the picker moto's, its own alias providers, no transformer), each member is found as
    the picker finds it: the same keys (`_attribute_keys_found_once`), tried in the same
    order, the first present the member's value; else moto's own."""
    from moto.core import serialize
    from moto.core.constants import MISSING
    from moto.core.utils import get_value as value_of

    whole = serialize.ResponseSerializer.get_value
    if getattr(whole, "without_path", False):
        return
    missing = MISSING
    picker_class = serialize.XFormedAttributePicker

    def picked(serializer: Any, value: Any, key: str, shape: Any) -> Any:
        """As moto's picker picks, without the member's path (read by transformers only)."""
        context = serialize.AttributePickerContext(
            obj=value,
            key=key,
            shape=shape,
            operation_model=serializer.operation_model,
            service_model=serializer.operation_model.service_model,
        )
        for possible_key in serializer._value_picker.get_possible_keys(context):
            found = value_of(value, possible_key, missing)
            if found is not missing:
                return found
        return None

    def get_value(serializer: Any, value: Any, key: str, shape: Any) -> Any:
        picker = serializer._value_picker
        plain = type(picker) in (serialize.AttributePicker, picker_class)
        if not plain or picker.response_transformers:
            return whole(serializer, value, key, shape)
        if (
            type(picker) is not picker_class
            or picker.alias_providers is not serialize.DEFAULT_ALIAS_PROVIDERS
            or "Meta" in getattr(value, "__dict__", ())
        ):
            return picked(serializer, value, key, shape)
        keys = _FOUND.get(_keys_key(serializer.service_model.service_name, value, key, shape))
        if keys is None:  # found now, and kept
            return picked(serializer, value, key, shape)
        return _first_present(value, keys, missing, value_of)

    get_value.without_path = True  # type: ignore[attr-defined]
    # moto's own, kept for a test
    get_value.whole = whole  # type: ignore[attr-defined]
    setattr(serialize.ResponseSerializer, "get_value", get_value)  # noqa: B010


def _first_present(value: Any, keys: tuple[str, ...], missing: Any, value_of: Any) -> Any:
    """The value of the first of `keys` present on `value`, as moto's `get_value`
    (`value_of`) looks each up (a dotted key: by it); None if none is."""
    indexed = hasattr(value, "__getitem__")
    for key in keys:
        if "." in key:
            found = value_of(value, key, missing)
        elif not indexed:
            found = getattr(value, key, missing)
        else:
            try:
                found = value[key]
            except (KeyError, IndexError, TypeError, AttributeError):
                found = missing
        if found is not missing:
            return found
    return None


def _xml_written_plainly() -> None:
    """moto writes each XML answer (Auto Scaling's, CloudWatch's) with xmltodict through
    SAX's XMLGenerator, a call or more for every element: a third of what a
    DescribeAutoScalingGroups of 40 instances costs moto. The same text written directly
    (`plain_xml`); a body it does not know (a comment, a namespaced attribute, an odd
    value) or one asked for pretty is xmltodict's, as before."""
    from moto.core import serialize

    whole = serialize.BaseXMLSerializer._serialize_body
    if getattr(whole, "written_plainly", False):
        return

    def _serialize_body(serializer: Any, body: Any) -> str:
        if not serializer.pretty_print:
            try:
                return plain_xml(body)
            except _NotPlainError:
                pass
        return whole(serializer, body)

    _serialize_body.written_plainly = True  # type: ignore[attr-defined]
    # moto's own, kept for a test
    _serialize_body.whole = whole  # type: ignore[attr-defined]
    setattr(serialize.BaseXMLSerializer, "_serialize_body", _serialize_body)  # noqa: B010


class _NotPlainError(Exception):
    """A body `plain_xml` leaves to xmltodict."""


_NAMES: set[str] = set()  # element and attribute names found valid, as xmltodict checks


def _name(name: object) -> str:
    if isinstance(name, str) and name in _NAMES:
        return name
    from xmltodict import _validate_name  # type: ignore[import-untyped]

    if not isinstance(name, str) or name.startswith("#"):
        raise _NotPlainError
    try:
        _validate_name(name, "element")
    except ValueError:
        raise _NotPlainError from None  # xmltodict's own error, from xmltodict
    _NAMES.add(name)
    return name


def _text(value: object) -> str:
    """A value as xmltodict writes it (`_convert_value_to_string`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", errors="replace")
    if hasattr(value, "__iter__"):  # a list in a list: xmltodict writes its repr
        raise _NotPlainError
    return str(value)


def plain_xml(body: dict[str, Any]) -> str:
    """`body` as `xmltodict.unparse(body, full_document=False, short_empty_elements=True)`
    writes it (moto's `_serialize_body`), for elements, text and plain attributes: a list
    an element an item, None an empty element, an empty list none, text after the
    children, text escaped and attributes quoted as SAX's XMLGenerator does, an element
    with nothing inside closed short. Anything else raises `_NotPlainError`."""
    writer = _PlainXml()
    for key, value in body.items():
        writer.element(key, value)
    return "".join(writer.out)


def _items(value: object) -> Any:
    """An element's value as xmltodict iterates it: a list's items, or the one value."""
    if isinstance(value, (list, tuple)):
        return value
    if not hasattr(value, "__iter__") or isinstance(value, (str, dict, bytes)):
        return (value,)
    raise _NotPlainError  # a set, a generator: xmltodict's


def _as_map(item: object) -> dict[Any, Any]:
    if item is None:
        return {}
    if isinstance(item, dict):
        return item
    return {"#text": _text(item)}


class _PlainXml:
    def __init__(self) -> None:
        self.out: list[str] = []

    def element(self, key: object, value: object) -> None:
        name = _name(key)
        for item in _items(value):
            self._one(name, _as_map(item))

    def _one(self, name: str, item: dict[Any, Any]) -> None:
        out = self.out
        text, children = self._start(name, item)
        opened = len(out)
        out.append(">")
        for child, child_value in children:
            self.element(child, child_value)
        if text:
            out.append(escape(text))
        if len(out) == opened + 1:  # nothing inside
            out[opened] = "/>"
        else:
            out.append(f"</{name}>")

    def _start(self, name: str, item: dict[Any, Any]) -> tuple[str, list[tuple[Any, Any]]]:
        """`<name` and its attributes written; its text and its children."""
        text, children = "", []
        self.out.append("<" + name)
        for child, value in item.items():
            if child == "#text":
                text = "" if value is None else _text(value)
            elif isinstance(child, str) and child.startswith("@"):
                if isinstance(value, dict):  # namespaces: xmltodict's
                    raise _NotPlainError
                said = "" if value is None else _text(value)
                self.out.append(f" {_name(child[1:])}={quoteattr(said)}")
            elif not (isinstance(value, list) and not value):
                children.append((child, value))
        return text, children


def _modules_listed_once() -> None:
    """moto's server lists its own package's folders (a `listdir` and a `stat` each,
    over a hundred) to route every request, often many times a request; they do not
    change while it runs: listed once."""
    from moto import backends

    if isinstance(backends.list_of_moto_modules, _Listed):
        return
    backends.list_of_moto_modules = _Listed(tuple(backends.list_of_moto_modules()))


def _handlers_listed_once() -> None:
    """moto finds the method answering a request among its responder class's functions,
    listed afresh for every request (`inspect.getmembers`: every attribute of the class);
    a class's functions do not change while the server runs: listed once a class."""
    from moto.core import responses

    whole = getattr(responses, "method_names_from_class")  # noqa: B009  (moto's import)
    if getattr(whole, "listed_once", False):
        return
    listed: dict[object, list[str]] = {}

    def method_names_from_class(clazz: object) -> list[str]:
        if clazz not in listed:
            listed[clazz] = whole(clazz)
        return list(listed[clazz])

    method_names_from_class.listed_once = True  # type: ignore[attr-defined]
    setattr(responses, "method_names_from_class", method_names_from_class)  # noqa: B010


@dataclass(frozen=True)
class _Listed:
    modules: tuple[str, ...]

    def __call__(self) -> tuple[str, ...]:
        return self.modules


def _without_deep_copies(
    backend: Any, transact_items: list[dict[str, Any]], backups: dict[str, Any], whole: Any
) -> None:
    """moto's transaction with its table backups (`copy.deepcopy` of each table it names,
    taken first) answered from `backups`."""
    from moto.dynamodb import models

    real = getattr(models, "copy")  # noqa: B009  (moto's `import copy`)

    class _Copy:
        @staticmethod
        def deepcopy(value: Any, *args: Any) -> Any:
            for name, backup in backups.items():
                if value is backend.tables.get(name):
                    return backup
            return real.deepcopy(value, *args)

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    setattr(models, "copy", _Copy())  # noqa: B010
    try:
        return whole(backend, transact_items)  # type: ignore[no-any-return]
    finally:
        setattr(models, "copy", real)  # noqa: B010


def _backed_up(table: Any, ops: list[dict[str, Any]]) -> Any:
    """A copy of `table` as it is: its item containers copied, the items `ops` name deep
    copied, every other item shared (no operation of the transaction touches it)."""
    import copy

    from moto.dynamodb.models.dynamo_type import DynamoType

    backup = copy.copy(table)
    items = copy.copy(table.items)  # the same defaultdict(dict), its own
    if table.range_key_attr is not None:
        for hashed, ranged in items.items():
            items[hashed] = dict(ranged)
    backup.items = items
    for op in ops:
        key = op.get("Key") or op.get("Item") or {}
        if table.hash_key_attr not in key:
            continue
        hashed = DynamoType(key[table.hash_key_attr])
        if table.range_key_attr is None:
            if hashed in items:
                items[hashed] = copy.deepcopy(items[hashed])
            continue
        if table.range_key_attr not in key or hashed not in items:
            continue
        ranged = DynamoType(key[table.range_key_attr])
        if ranged in items[hashed]:
            items[hashed][ranged] = copy.deepcopy(items[hashed][ranged])
    return backup
