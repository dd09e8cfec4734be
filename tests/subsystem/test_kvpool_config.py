"""KV pool configuration: sizes (S18), store settings, the extra config, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.backend import (
    check_batch,
    parse_byte_size,
    split_host_port,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.memcache_backend import (
    MemcacheStoreConfig,
)
from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend.mooncake_backend import (
    CONFIG_PATH_ENV,
    MooncakeStoreConfig,
)

GIB = 1 << 30


# ---- S18: sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        1073741824,
        "1GB",
        "1gb",
        " 1 GB ",
        "1024MB",
        "1048576KB",
        "1073741824B",
        "1073741824",
        "1GiB",
        "1 gib",
        "1024 MiB",
    ],
)
def test_one_gib_in_every_accepted_spelling(value: object) -> None:
    assert parse_byte_size("global_segment_size", value) == GIB


def test_fractions_are_read_exactly_when_they_name_whole_bytes() -> None:
    assert parse_byte_size("local_buffer_size", "1.5GB") == 3 * GIB // 2
    assert parse_byte_size("local_buffer_size", "0.5 KB") == 512
    with pytest.raises(ValueError, match="local_buffer_size: '0.3B' is not a whole number"):
        parse_byte_size("local_buffer_size", "0.3B")


@pytest.mark.parametrize(
    "value", ["-5", "50%", "", "abc", None, True, False, "1G", "1 GBB", "1e9", 1.5, -1, [], "GB"]
)
def test_rejected_sizes_name_the_field(value: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_byte_size("global_segment_size", value)
    assert str(info.value).startswith("global_segment_size: ")
    assert repr(value) in str(info.value)


def test_minimum_is_enforced() -> None:
    assert parse_byte_size("x", 0) == 0
    with pytest.raises(ValueError, match="below the minimum of 16 bytes"):
        parse_byte_size("x", "8B", minimum=16)


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:50051", ("127.0.0.1", 50051)), ("[::1]:9", ("::1", 9)), (" h:1 ", ("h", 1))],
)
def test_host_port(address: str, expected: tuple[str, int]) -> None:
    assert split_host_port("f", address) == expected


@pytest.mark.parametrize("address", ["127.0.0.1", ":80", "h:0", "h:70000", "h:x", 5, None])
def test_bad_host_port(address: object) -> None:
    with pytest.raises(ValueError, match="f: expected 'host:port'"):
        split_host_port("f", address)


def test_check_batch_rejects_malformed_calls() -> None:
    check_batch(["a", "b"], [[1], [2, 3]], [[4], [5, 6]])
    for keys, addrs, sizes, message in [
        (["a"], [[1], [2]], [[1], [2]], "1 keys but 2 address lists"),
        (["a"], [[1, 2]], [[1]], "2 addresses but 1 sizes"),
        (["a"], [[]], [[]], "0 addresses"),
        (["a"], [[1]], [[0]], "must be positive"),
        ([""], [[1]], [[1]], "empty key"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_batch(keys, addrs, sizes)


# ---- Mooncake store settings -----------------------------------------------------------------


def test_mooncake_defaults_and_overrides() -> None:
    cfg = MooncakeStoreConfig.from_mapping({"master_server_address": "127.0.0.1:1"})
    assert (cfg.metadata_server, cfg.protocol, cfg.local_hostname) == (
        "P2PHANDSHAKE",
        "tcp",
        "127.0.0.1",
    )
    assert cfg.global_segment_size == GIB and cfg.replica_num == 1
    cfg = MooncakeStoreConfig.from_mapping(
        {
            "master_server_address": "10.0.0.1:50051",
            "metadata_server": "http://10.0.0.1:8080/metadata",
            "global_segment_size": "4GB",
            "local_buffer_size": 0,
            "replica_num": 2,
            "prefer_local_segment": True,
        }
    )
    assert cfg.global_segment_size == 4 * GIB and cfg.local_buffer_size == 0
    assert cfg.replica_num == 2 and cfg.prefer_local_segment


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "'master_server_address' is required"),
        ({"master_server_address": "nohost"}, "expected 'host:port'"),
        ({"master_server_address": "h:1", "bogus": 1}, r"unknown key\(s\) \['bogus'\]; valid"),
        ({"master_server_address": "h:1", "metadata_server": "foo://x"}, "P2PHANDSHAKE"),
        ({"master_server_address": "h:1", "global_segment_size": "50%"}, "global_segment_size"),
        ({"master_server_address": "h:1", "global_segment_size": "1MB"}, "minimum of 16777216"),
        ({"master_server_address": "h:1", "replica_num": 0}, "replica_num"),
        ({"master_server_address": "h:1", "replica_num": True}, "replica_num"),
        ({"master_server_address": "h:1", "protocol": ""}, "protocol"),
        ({"master_server_address": "h:1", "connect_timeout_s": -1}, "connect_timeout_s"),
        ({"master_server_address": "h:1", "prefer_local_segment": "yes"}, "prefer_local"),
    ],
)
def test_mooncake_invalid_settings(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MooncakeStoreConfig.from_mapping(data)


def test_mooncake_config_from_the_environment_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mooncake.json"
    path.write_text(json.dumps({"master_server_address": "127.0.0.1:7", "protocol": "rdma"}))
    monkeypatch.setenv(CONFIG_PATH_ENV, str(path))
    assert MooncakeStoreConfig.load(None).protocol == "rdma"
    # The connector's inline settings win over the file.
    assert MooncakeStoreConfig.load({"master_server_address": "h:2"}).protocol == "tcp"
    path.write_text("{not json")
    with pytest.raises(ValueError, match=f"\\${CONFIG_PATH_ENV}={path}: cannot read the JSON"):
        MooncakeStoreConfig.load(None)
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="cannot read the JSON"):
        MooncakeStoreConfig.load(None)
    monkeypatch.delenv(CONFIG_PATH_ENV)
    with pytest.raises(ValueError, match="no Mooncake store config"):
        MooncakeStoreConfig.load(None)


# ---- MemCache store settings -----------------------------------------------------------------


def test_memcache_settings() -> None:
    urls = {"meta_service_url": "tcp://127.0.0.1:1", "config_store_url": "tcp://127.0.0.1:2"}
    cfg = MemcacheStoreConfig.from_mapping({**urls, "dram_size": "64MB", "protocol": "host_tcp"})
    assert cfg.dram_size == 64 << 20 and cfg.hbm_size == 0 and cfg.protocol == "host_tcp"
    for data, message in [
        ({}, "'meta_service_url' is required"),
        ({**urls, "meta_service_url": "127.0.0.1:1"}, "tcp://host:port"),
        ({**urls, "protocol": "udp"}, "protocol must be one of"),
        ({**urls, "replica_num": 9}, "at most 8"),
        ({**urls, "device_id": -1}, "device_id"),
        ({**urls, "dram_size": "lots"}, "dram_size"),
        ({**urls, "x": 1}, r"unknown key\(s\) \['x'\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            MemcacheStoreConfig.from_mapping(data)


# ---- the connector's extra config (needs vLLM for the metadata base class) --------------------


def test_connector_extra_config() -> None:
    pytest.importorskip("vllm")
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.config_data import (
        AscendStoreConfig,
    )

    cfg = AscendStoreConfig.from_extra_config(None)
    assert cfg.backend == "mooncake" and cfg.backend_config is None and not cfg.load_async
    cfg = AscendStoreConfig.from_extra_config(
        {"backend": "MemCache", "memcache": {"a": 1}, "load_async": True, "retry_interval_s": 1}
    )
    assert cfg.backend == "memcache" and cfg.backend_config == {"a": 1}
    assert cfg.load_async and cfg.retry_interval_s == 1.0
    assert cfg.load_timeout_s == 30.0
    assert AscendStoreConfig.from_extra_config({"load_timeout_s": 2.5}).load_timeout_s == 2.5
    assert cfg.failed_load_ttl_s == 10.0
    assert AscendStoreConfig.from_extra_config({"failed_load_ttl_s": 0.5}).failed_load_ttl_s == 0.5
    for extra, message in [
        ({"load_timeout_s": 0}, "load_timeout_s"),
        ({"load_timeout_s": "soon"}, "load_timeout_s"),
        ({"load_timeoutt_s": 1}, r"valid keys.*'load_timeout_s'"),
        ({"failed_load_ttl_s": 0}, "failed_load_ttl_s"),
        ({"failed_load_ttl_s": "15s"}, "failed_load_ttl_s"),
        ({"backend": "redis"}, "must be one of"),
        ({"mooncake": "x"}, "must be an object"),
        ({"load_async": "yes"}, "load_async"),
        ({"save_queue_size": 0}, "save_queue_size"),
        ({"transfer_batch_keys": 1.5}, "must be an integer"),
        ({"namespace": " "}, "namespace"),
        ({"chunk_size": 256}, r"unknown AscendStoreConnector .*'chunk_size'.*valid keys"),
    ]:
        with pytest.raises(ValueError, match=message):
            AscendStoreConfig.from_extra_config(extra)


# ---- lazy imports ----------------------------------------------------------------------------


def test_backend_package_imports_neither_store() -> None:
    code = (
        "import sys\n"
        "import vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend as b\n"
        "assert b.backend_class('mooncake').__name__ == 'MooncakeBackend'\n"
        "assert b.MemcacheBackend.__name__ == 'MemcacheBackend'\n"
        "print(sorted(m for m in ('mooncake', 'mooncake.store', 'memcache_hybrid', 'torch')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"


def test_unknown_backend_name() -> None:
    from vllm_ascend.distributed.kv_transfer.kv_pool.ascend_store.backend import backend_class

    with pytest.raises(ValueError, match=r"unknown KV pool backend 'redis'; known: \['memcache'"):
        backend_class("redis")
