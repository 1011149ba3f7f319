# The ABI surface of softverbs' libibverbs.so.1 (provider/abi/).
# include()d by provider/CMakeLists.txt, which then:
#   target_sources(softverbs PRIVATE ${SV_ABI_SOURCES})
#   sv_abi_link(softverbs)
set(SV_ABI_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SV_ABI_SOURCES
	${SV_ABI_DIR}/compat_1_0.c
	${SV_ABI_DIR}/derived.c
	${SV_ABI_DIR}/marshall.c
	${SV_ABI_DIR}/private34.c
	${SV_ABI_DIR}/strings.c
	${SV_ABI_DIR}/unsupported.c
	${SV_ABI_DIR}/verbs_ah.c
	${SV_ABI_DIR}/verbs_channel.c
	${SV_ABI_DIR}/verbs_context.c
	${SV_ABI_DIR}/verbs_cq.c
	${SV_ABI_DIR}/verbs_device.c
	${SV_ABI_DIR}/verbs_import.c
	${SV_ABI_DIR}/verbs_mcast.c
	${SV_ABI_DIR}/verbs_mr.c
	${SV_ABI_DIR}/verbs_qp.c
	${SV_ABI_DIR}/verbs_srq.c)

# Soname, version nodes, hidden-by-default symbols, no undefined symbols.
function(sv_abi_link target)
	set_target_properties(${target} PROPERTIES
		OUTPUT_NAME ibverbs
		VERSION 1.14.44.0
		SOVERSION 1
		C_VISIBILITY_PRESET hidden
		LINK_DEPENDS ${SV_ABI_DIR}/libibverbs.map)
	target_include_directories(${target} PRIVATE ${SV_ABI_DIR})
	target_link_options(${target} PRIVATE
		-Wl,--version-script=${SV_ABI_DIR}/libibverbs.map
		-Wl,-z,defs -Wl,--no-undefined)
endfunction()
