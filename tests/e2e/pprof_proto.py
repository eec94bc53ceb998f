"""A reader of pprof's profile.proto (github.com/google/pprof, proto/profile.proto) that owes
nothing to sonde's writer: Debian's python3-protobuf parses the file against message
descriptors built here from the spec's field numbers and types, so no protoc is needed."""
import gzip

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto
INT64, UINT64, BOOL, STRING, MESSAGE = (F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL, F.TYPE_STRING,
                                        F.TYPE_MESSAGE)
PACKAGE = "perftools.profiles"

# message: [(field name, number, type, repeated, message type)], as profile.proto declares them.
MESSAGES = {
    "Profile": [("sample_type", 1, MESSAGE, True, "ValueType"),
                ("sample", 2, MESSAGE, True, "Sample"),
                ("mapping", 3, MESSAGE, True, "Mapping"),
                ("location", 4, MESSAGE, True, "Location"),
                ("function", 5, MESSAGE, True, "Function"),
                ("string_table", 6, STRING, True, None),
                ("drop_frames", 7, INT64, False, None),
                ("keep_frames", 8, INT64, False, None),
                ("time_nanos", 9, INT64, False, None),
                ("duration_nanos", 10, INT64, False, None),
                ("period_type", 11, MESSAGE, False, "ValueType"),
                ("period", 12, INT64, False, None),
                ("comment", 13, INT64, True, None),
                ("default_sample_type", 14, INT64, False, None)],
    "ValueType": [("type", 1, INT64, False, None), ("unit", 2, INT64, False, None)],
    "Sample": [("location_id", 1, UINT64, True, None), ("value", 2, INT64, True, None),
               ("label", 3, MESSAGE, True, "Label")],
    "Label": [("key", 1, INT64, False, None), ("str", 2, INT64, False, None),
              ("num", 3, INT64, False, None), ("num_unit", 4, INT64, False, None)],
    "Mapping": [("id", 1, UINT64, False, None), ("memory_start", 2, UINT64, False, None),
                ("memory_limit", 3, UINT64, False, None), ("file_offset", 4, UINT64, False, None),
                ("filename", 5, INT64, False, None), ("build_id", 6, INT64, False, None),
                ("has_functions", 7, BOOL, False, None), ("has_filenames", 8, BOOL, False, None),
                ("has_line_numbers", 9, BOOL, False, None),
                ("has_inline_frames", 10, BOOL, False, None)],
    "Location": [("id", 1, UINT64, False, None), ("mapping_id", 2, UINT64, False, None),
                 ("address", 3, UINT64, False, None), ("line", 4, MESSAGE, True, "Line"),
                 ("is_folded", 5, BOOL, False, None)],
    "Line": [("function_id", 1, UINT64, False, None), ("line", 2, INT64, False, None)],
    "Function": [("id", 1, UINT64, False, None), ("name", 2, INT64, False, None),
                 ("system_name", 3, INT64, False, None), ("filename", 4, INT64, False, None),
                 ("start_line", 5, INT64, False, None)],
}


def _profile_class():
    file = descriptor_pb2.FileDescriptorProto(name="sonde_test_profile.proto", package=PACKAGE,
                                              syntax="proto3")
    for name, fields in MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, kind, repeated, type_name in fields:
            f = message.field.add(name=field, number=number, type=kind,
                                  label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL)
            if type_name:
                f.type_name = f".{PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName(f"{PACKAGE}.Profile")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.x
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


Profile = _profile_class()


def read_profile(path):
    """The Profile message of a gzip-compressed profile.proto file."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:2] == b"\x1f\x8b", "not gzip"
    profile = Profile()
    profile.ParseFromString(gzip.decompress(data))
    return profile
