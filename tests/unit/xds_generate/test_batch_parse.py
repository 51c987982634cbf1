"""parse_many (batch_parse.py): one parse for many serialized resources gives the messages
`FromString` gives one by one, of the same class, independent of the batch they came from."""

from __future__ import annotations

import gc

from envoy.config.cluster.v3 import cluster_pb2
from envoy.config.endpoint.v3 import endpoint_pb2

from meshpilot.xds.generate.batch_parse import parse_many


def _cluster(name: str) -> cluster_pb2.Cluster:
    cluster = cluster_pb2.Cluster(name=name, alt_stat_name=name + ";")
    cluster.eds_cluster_config.service_name = name
    cluster.metadata.filter_metadata["istio"].update({"config": f"/apis/{name}"})
    return cluster


def test_parse_many_equals_parsing_one_by_one() -> None:
    bodies = [_cluster(f"c{i}").SerializeToString() for i in range(300)]
    # A body made of two concatenated serializations merges, as in FromString.
    bodies.append(bodies[0] + cluster_pb2.Cluster(name="merged").SerializeToString())
    parsed = parse_many(cluster_pb2.Cluster, bodies)
    assert parsed == [cluster_pb2.Cluster.FromString(b) for b in bodies]
    assert parsed[-1].name == "merged" and parsed[-1].alt_stat_name == "c0;"
    assert all(type(c) is cluster_pb2.Cluster for c in parsed)


def test_one_or_no_body_and_other_types() -> None:
    assert parse_many(cluster_pb2.Cluster, []) == []
    one = _cluster("a").SerializeToString()
    assert parse_many(cluster_pb2.Cluster, [one]) == [cluster_pb2.Cluster.FromString(one)]
    clas = [endpoint_pb2.ClusterLoadAssignment(cluster_name=n) for n in ("x", "y")]
    parsed = parse_many(endpoint_pb2.ClusterLoadAssignment, [c.SerializeToString() for c in clas])
    assert parsed == clas


def test_messages_outlive_their_batch_and_change_alone() -> None:
    parsed = parse_many(cluster_pb2.Cluster, [_cluster(n).SerializeToString() for n in "abc"])
    kept = parsed[1]
    del parsed
    gc.collect()
    assert kept == _cluster("b")
    copy = cluster_pb2.Cluster()
    copy.CopyFrom(kept)
    kept.name = "changed"
    assert copy.name == "b"
    assert cluster_pb2.Cluster.FromString(kept.SerializeToString()).name == "changed"


def test_the_batch_type_is_made_once_even_when_threads_race() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from envoy.config.listener.v3 import listener_pb2

    body = listener_pb2.Listener(name="l").SerializeToString()
    with ThreadPoolExecutor(4) as pool:
        results = list(
            pool.map(lambda _: parse_many(listener_pb2.Listener, [body, body]), range(8))
        )
    assert all(r == [listener_pb2.Listener(name="l")] * 2 for r in results)
