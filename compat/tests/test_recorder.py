"""Tests of recorder.py's request parsing: a clean request has nothing after its body, librdkafka's
padded all-topics Metadata has 3 bytes, and no byte string makes the parser raise (the proxy
forwards every frame whatever it holds).

    compat/.venv/bin/python -m unittest discover -s compat/tests -v
"""

import os
import random
import struct
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import recorder  # noqa: E402  (the path above first)
from kafka.protocol.admin import CreateTopicsRequest  # noqa: E402
from kafka.protocol.metadata import MetadataRequest  # noqa: E402


def frame(api_key, version, body, client_id=b"compat-test", flexible=True, correlation=7):
    """A request frame without its size prefix: header v1 or v2, then the body."""
    header = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    if flexible:
        header += b"\x00"  # no tagged fields
    return header + body


class ParseRequestTest(unittest.TestCase):
    def test_a_clean_all_topics_metadata_has_no_trailing_bytes(self):
        """Metadata v13 for all topics: a 4-byte body and nothing after it."""
        body = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False).encode(version=13)
        rec = recorder.parse_request(frame(3, 13, body))
        self.assertEqual(rec["api"], "Metadata")
        self.assertEqual(rec["client_id"], "compat-test")
        self.assertEqual(rec["header_version"], 2)
        self.assertEqual(rec["body_bytes"], 4)
        self.assertEqual(rec["trailing_bytes"], 0)

    def test_three_bytes_after_the_body_are_counted(self):
        """The shape librdkafka 2.16 sends: the same request with 3 bytes after the body."""
        body = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False).encode(version=13)
        rec = recorder.parse_request(frame(3, 13, body + b"\x00\x00\x00"))
        self.assertEqual(rec["trailing_bytes"], 3)

    def test_a_non_flexible_request_uses_header_v1(self):
        """CreateTopics v4 is not flexible: no tagged fields in the header, none after the body."""
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=False)
        rec = recorder.parse_request(frame(19, 4, req.encode(version=4), flexible=False))
        self.assertEqual(rec["header_version"], 1)
        self.assertEqual(rec["trailing_bytes"], 0)

    def test_a_truncated_body_is_recorded_as_undecodable(self):
        """A body cut short is reported, not raised."""
        req = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="topic", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=1000, validate_only=False)
        body = req.encode(version=7)
        rec = recorder.parse_request(frame(19, 7, body[:len(body) // 2]))
        self.assertIn("undecodable", rec.get("body", ""))

    def test_a_frame_shorter_than_a_header_is_an_error(self):
        rec = recorder.parse_request(b"\x00\x03\x00")
        self.assertIn("error", rec)

    def test_an_api_without_a_schema_is_said_so(self):
        rec = recorder.parse_request(frame(32000, 0, b"", flexible=False))
        self.assertEqual(rec["body"], "no schema")

    def test_a_varint_longer_than_five_bytes_is_refused(self):
        with self.assertRaises(ValueError):
            recorder.read_uvarint(b"\xff\xff\xff\xff\xff\x01", 0)
        with self.assertRaises(ValueError):
            recorder.read_uvarint(b"\x80", 0)

    def test_no_byte_string_makes_the_parser_raise(self):
        """Random frames (seeded): headers of every served key and version, random bodies."""
        rng = random.Random(14)
        keys = sorted(recorder.REQUESTS)
        for _ in range(3000):
            key = rng.choice(keys + [rng.randrange(-5, 200)])
            version = rng.randrange(-2, 20)
            client = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12)))
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
            data = frame(key, version, body, client_id=client, flexible=rng.random() < 0.5)
            data = data[:rng.randrange(0, len(data) + 1)] if rng.random() < 0.2 else data
            rec = recorder.parse_request(data)
            self.assertEqual(rec["size"], len(data))
            if "trailing_bytes" in rec:
                self.assertGreaterEqual(rec["trailing_bytes"], 0)
                self.assertLessEqual(rec["trailing_bytes"] + rec["body_bytes"], len(data))


if __name__ == "__main__":
    unittest.main()
