# One place for the warning set every parla target builds with (-Wall -Wextra clean).
function(parla_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
endfunction()
