"""Every registered op declares exactly the attributes its ONNX schema has for that opset."""
import onnx
import pytest

from vkml.ops import registered


def _cases():
    for (domain, op_type), versions in sorted(registered().items()):
        for cls in versions:
            yield pytest.param(cls, id=f"{domain or 'ai.onnx'}.{op_type}-{cls.since}")


@pytest.mark.parametrize("cls", list(_cases()))
def test_attributes_match_schema(cls):
    try:
        schema = onnx.defs.get_schema(cls.op_type, cls.since, cls.domain)
    except onnx.defs.SchemaError:
        pytest.fail(f"{cls.op_type} since {cls.since}: onnx has no such schema")
    assert schema.since_version == cls.since, (
        f"{cls.__name__}.since={cls.since} but the schema in force then dates from {schema.since_version}"
    )
    assert set(cls.attrs) == set(schema.attributes), (
        f"{cls.__name__}: declared {sorted(cls.attrs)}, schema has {sorted(schema.attributes)}"
    )
