"""labkit.quantity against the cases of apimachinery's quantity_test.go (TestQuantityParse,
TestQuantityString, the invalid list) and the error texts of quantity.go; and the labs' Pod
readers (resources, numa, mounts) refusing a bad quantity in the API server's words."""

from __future__ import annotations

from fractions import Fraction

import pytest

from labkit import quantity
from labkit.quantity import BINARY, DECIMAL, EXPONENT, Quantity, QuantityError, canonical, format_quantity, parse

pytestmark = pytest.mark.host_free

FORMAT = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
SUFFIX = "unable to parse quantity's suffix"
NUMERIC = "unable to parse numeric part of quantity"


def dec(mantissa, exponent) -> Fraction:
    return Fraction(mantissa) * Fraction(10) ** exponent


# TestQuantityParse's table: input, value, format
PARSED = [
    ("0", 0, DECIMAL), ("0n", 0, DECIMAL), ("0u", 0, DECIMAL), ("0m", 0, DECIMAL), ("0Ki", 0, BINARY),
    ("0k", 0, DECIMAL), ("0Mi", 0, BINARY), ("0M", 0, DECIMAL), ("0Gi", 0, BINARY), ("0G", 0, DECIMAL),
    ("0Ti", 0, BINARY), ("0T", 0, DECIMAL),
    ("0.1", dec(1, -1), DECIMAL), ("0.0000000001", dec(1, -9), DECIMAL),
    ("1Ki", 1024, BINARY), ("8Ki", 8 * 1024, BINARY), ("7Mi", 7 * 2 ** 20, BINARY), ("6Gi", 6 * 2 ** 30, BINARY),
    ("5Ti", 5 * 2 ** 40, BINARY), ("4Pi", 4 * 2 ** 50, BINARY), ("3Ei", 3 * 2 ** 60, BINARY),
    ("10Ti", 10 * 2 ** 40, BINARY), ("100Ti", 100 * 2 ** 40, BINARY),
    ("5n", dec(5, -9), DECIMAL), ("4u", dec(4, -6), DECIMAL), ("3m", dec(3, -3), DECIMAL), ("9", 9, DECIMAL),
    ("8k", dec(8, 3), DECIMAL), ("50k", dec(5, 4), DECIMAL), ("7M", dec(7, 6), DECIMAL), ("6G", dec(6, 9), DECIMAL),
    ("5T", dec(5, 12), DECIMAL), ("40T", dec(4, 13), DECIMAL), ("300T", dec(3, 14), DECIMAL),
    ("2P", dec(2, 15), DECIMAL), ("1E", dec(1, 18), DECIMAL),
    ("1E-3", dec(1, -3), EXPONENT), ("1e3", dec(1, 3), EXPONENT), ("1E6", dec(1, 6), EXPONENT),
    ("1e9", dec(1, 9), EXPONENT), ("1E12", dec(1, 12), EXPONENT), ("1e15", dec(1, 15), EXPONENT),
    ("1E18", dec(1, 18), EXPONENT), ("1e14", dec(1, 14), EXPONENT), ("1e13", dec(1, 13), EXPONENT),
    ("100.035k", 100035, DECIMAL),
    ("0.001", dec(1, -3), DECIMAL), ("0.0005k", dec(5, -1), DECIMAL), ("0.005", dec(5, -3), DECIMAL),
    ("0.05", dec(5, -2), DECIMAL), ("0.5", dec(5, -1), DECIMAL), ("0.00050k", dec(5, -1), DECIMAL),
    ("0.00500", dec(5, -3), DECIMAL), ("0.05000", dec(5, -2), DECIMAL), ("0.50000", dec(5, -1), DECIMAL),
    ("0.5e0", dec(5, -1), EXPONENT), ("0.5e-1", dec(5, -2), EXPONENT), ("0.5e-2", dec(5, -3), EXPONENT),
    ("10.035M", dec(10035, 3), DECIMAL),
    ("1.2e3", dec(12, 2), EXPONENT), ("1.3E+6", dec(13, 5), EXPONENT), ("1.40e9", dec(14, 8), EXPONENT),
    ("1.53E12", dec(153, 10), EXPONENT), ("1.6e15", dec(16, 14), EXPONENT), ("1.7E18", dec(17, 17), EXPONENT),
    ("9.01", dec(901, -2), DECIMAL), ("8.1k", dec(81, 2), DECIMAL), ("7.123456M", 7123456, DECIMAL),
    ("6.987654321G", 6987654321, DECIMAL), ("5.444T", dec(5444, 9), DECIMAL), ("40.1T", dec(401, 11), DECIMAL),
    ("300.2T", dec(3002, 11), DECIMAL), ("2.5P", dec(25, 14), DECIMAL), ("1.01E", dec(101, 16), DECIMAL),
    # things that saturate or round
    ("3.001n", dec(4, -9), DECIMAL), ("1.1E-9", dec(2, -9), EXPONENT), ("0.0000000005", dec(1, -9), DECIMAL),
    ("0.00000000050", dec(1, -9), DECIMAL), ("0.5e-9", dec(1, -9), EXPONENT), ("0.9n", dec(1, -9), DECIMAL),
    ("0.00000012345", dec(124, -9), DECIMAL), ("0.00000012354", dec(124, -9), DECIMAL),
    ("9Ei", 2 ** 63 - 1, BINARY), ("9223372036854775807Ki", 2 ** 63 - 1, BINARY), ("12E", dec(12, 18), DECIMAL),
    # fractional binary
    ("100.035Ki", dec(10243584, -2), BINARY), ("0.5Mi", 2 ** 19, BINARY), ("0.05Gi", dec(536870912, -1), BINARY),
    ("0.025Ti", dec(274877906944, -1), BINARY),
    # "things written by trolls"
    ("0.000000000001Ki", dec(2, -9), DECIMAL), (".001", dec(1, -3), DECIMAL), (".0001k", dec(100, -3), DECIMAL),
    ("1.", 1, DECIMAL), ("1.G", dec(1, 9), DECIMAL),
]


@pytest.mark.parametrize("text,value,fmt", PARSED)
def test_parse_as_upstream_with_either_sign(text, value, fmt):
    assert parse(text) == (Fraction(value), fmt)
    assert parse("+" + text) == (Fraction(value), fmt)
    assert parse("-" + text) == (-Fraction(value), fmt)


# the invalid list of TestQuantityParse, each with the error ParseQuantity gives
INVALID = [
    ("1.1.M", FORMAT), ("1+1.0M", FORMAT), ("0.1mi", SUFFIX), ("0.1am", FORMAT), ("aoeu", FORMAT),
    (".5i", SUFFIX), ("1i", SUFFIX), ("-3.01i", SUFFIX), ("-3.01e-", SUFFIX),
    (" 1", FORMAT), ("1 ", FORMAT), ("", FORMAT),
    # more of labkit's: a unit students write, a suffix with digits, an exponent without digits
    ("100MB", FORMAT), ("lots", FORMAT), ("1Ki5", SUFFIX), ("1e", SUFFIX), ("2 Gi", FORMAT),
    # a number without digits on the slow path (inf.Dec cannot read ".")
    (".e-20", NUMERIC), ("-.E-10", NUMERIC),
]


@pytest.mark.parametrize("text,message", INVALID)
def test_refused_with_upstreams_error(text, message):
    with pytest.raises(QuantityError) as err:
        parse(text)
    assert str(err.value) == message


def test_the_scanners_quirks_are_kept():
    # parseQuantityString returns "0" for a lone sign or point, and ParseQuantity accepts it
    for text in ("+", "-", ".", "-0", "000"):
        assert parse(text) == (0, DECIMAL)
    assert parse(".e5") == (0, EXPONENT)
    assert parse("-.Ki") == (0, BINARY)       # the binary fast path needs no digit either


def test_an_exponent_is_int32_as_v1_34_reads_it():
    # interpret: strconv.ParseInt then int32(parsed); 4294967297 = 2^32 + 1 wraps to 1
    assert parse("1e4294967297") == (10, EXPONENT)
    with pytest.raises(QuantityError, match="suffix"):
        parse("1e9223372036854775808")          # past int64: ParseInt's range error
    with pytest.raises(QuantityError, match="suffix"):
        parse("1e400000")                       # labkit's bound (module docstring)


# TestQuantityString: value, format, String()
STRINGS = [
    (2 ** 30, BINARY, "1Gi"), (300 * 2 ** 20, BINARY, "300Mi"), (6 * 1024, BINARY, "6Ki"),
    (1001 * 2 ** 30, BINARY, "1001Gi"), (2 ** 40, BINARY, "1Ti"), (5, BINARY, "5"), (dec(500, -3), BINARY, "500m"),
    (dec(1, 9), DECIMAL, "1G"), (dec(1000, 6), DECIMAL, "1G"), (dec(1000000, 3), DECIMAL, "1G"),
    (dec(1, -3), DECIMAL, "1m"), (dec(80, -3), DECIMAL, "80m"), (dec(1080, -3), DECIMAL, "1080m"),
    (dec(108, -2), DECIMAL, "1080m"), (dec(300, 6), DECIMAL, "300M"), (dec(1, 12), DECIMAL, "1T"),
    (dec(1234567, 6), DECIMAL, "1234567M"), (dec(1234567, -3), BINARY, "1234567m"), (dec(3, 3), DECIMAL, "3k"),
    (dec(1025, 0), BINARY, "1025"), (dec(1, -9), DECIMAL, "1n"), (dec(1, 3), EXPONENT, "1e3"),
    (dec(1, 18), EXPONENT, "1e18"), (dec(1, 19), EXPONENT, "10e18"), (dec(1, 20), DECIMAL, "100E"),
    (0, BINARY, "0"), (0, EXPONENT, "0"), (-dec(901, -2), DECIMAL, "-9010m"), (-1536, BINARY, "-1536"),
    (-2048, BINARY, "-2Ki"),
]


@pytest.mark.parametrize("value,fmt,text", STRINGS)
def test_string_as_upstream(value, fmt, text):
    assert format_quantity(Fraction(value), fmt) == text
    assert str(Quantity(Fraction(value), fmt)) == text


def test_json_values_are_trimmed_and_numbers_read_as_written():
    # Quantity.UnmarshalJSON: strings.TrimSpace before ParseQuantity; a JSON number as its text
    assert canonical(" 1Gi ") == "1Gi"
    assert canonical(0.5) == "500m"
    assert canonical(1024) == "1024"
    assert Quantity.parse(" 100Mi") == Quantity(Fraction(100 * 2 ** 20), BINARY)
    for bad in (True, None, [1]):
        with pytest.raises(QuantityError, match=r"regular expression"):
            canonical(bad)
    assert canonical("1.0001m", round_milli=True) == "2m"        # SetDefaults_ResourceList


def test_the_labs_and_the_api_server_share_one_implementation():
    import labkit.apiserver.defaults as defaults
    import labkit.pods as pods

    assert defaults.quantity is quantity
    assert pods.Quantity is Quantity


POD = """apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {limits: {memory: %s}}
"""


@pytest.mark.parametrize("value,message", [("100MB", FORMAT), ("1Ki5", SUFFIX), ("'1 Gi'", FORMAT)])
def test_lab_pod_readers_refuse_as_the_api_server(tmp_path, value, message):
    """resources, numa and mounts read Pod files as kube-apiserver decodes them: the message is
    the one kubectl prints for the server's 400."""
    from labkit.mounts.pods import load_pods as mounts_pods
    from labkit.numa.pods import load_pods as numa_pods
    from labkit.resources.node import load_pods_strict

    path = tmp_path / "pod.yaml"
    path.write_text(POD % value)
    expected = (f'Error from server (BadRequest): error when creating "{path}": Pod in version "v1" cannot be '
                f'handled as a Pod: {message}')
    for load in (load_pods_strict, numa_pods, lambda p: mounts_pods(p, strict=True)):
        with pytest.raises(Exception) as err:
            load(path)
        assert str(err.value) == expected
