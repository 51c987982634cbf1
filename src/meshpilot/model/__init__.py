"""PushContext, Proxy and the indexes translation asks questions of. No protobuf here."""
