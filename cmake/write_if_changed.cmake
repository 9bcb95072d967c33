# bdn_write_if_changed(PATH TEXT): writes TEXT to PATH only when the file's text differs, so that
# a generated file whose content is unchanged keeps its time and recompiles nothing. For the
# scripts run with cmake -P (build_info.cmake, embed_migrations.cmake).
function(bdn_write_if_changed path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
